"""What routing hands the resilience layer, in one typed object filled once at start-up.

Resilience never imports routing (the layers point one way), yet a few of its chores need
what only routing owns: the names of the connections a lock is labelled with, the expired
re-check pass, the write of a connection's state to its row, the breaker policies and
admission counts health reports, and the durable state restored and swept with the breakers
(the session-affinity pins). ``RoutingConfig.ready`` builds one :class:`RoutingHooks` and
installs it (:func:`install_hooks`); resilience reads it through :func:`hooks` each time it
needs one. Tests swap it for the length of a block with :func:`replaced_hooks`.

Until it is installed the defaults do nothing and return empties: locks are labelled by
connection id, no re-check pass runs, a connection's state is not written (a warning says
so), health reports no policies and no admission gates, and nothing else is restored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import BreakerPolicy
from resilience.domain.connection_state import ConnectionState

__all__ = [
    "AdmissionSource",
    "ConnectionNames",
    "ConnectionWriter",
    "DurableRestore",
    "DurableState",
    "DurableSweep",
    "HealthPolicies",
    "PolicySource",
    "RoutingHooks",
    "hooks",
    "install_hooks",
    "replaced_hooks",
]


@dataclass(frozen=True, slots=True)
class HealthPolicies:
    """What health needs from the routing configuration: breaker policies by provider."""

    breakers: dict[str, BreakerPolicy] = field(default_factory=dict)
    default: BreakerPolicy = field(default_factory=BreakerPolicy)
    window_gate_enabled: bool = False


ConnectionNames = Callable[[Collection[int]], Mapping[int, str]]
"""Names of the given connection ids (one query); ids of missing connections are left out."""
ConnectionWriter = Callable[[int, ConnectionState], None]
"""Write a connection's cooldown and error columns to its row (sync, one UPDATE)."""
PolicySource = Callable[[], Awaitable[HealthPolicies]]
"""The configured breaker policies, as the health payload reports them."""
AdmissionSource = Callable[[], dict[str, Any]]
"""This process's admission gates' running and queued counts."""
DurableRestore = Callable[[StateStore, bool], Awaitable[int]]
"""Load a kind of durable state into a store: ``(store, overwrite)`` → how many records."""
DurableSweep = Callable[[StateStore], Awaitable[object]]
"""Drop what has lapsed of a kind of durable state (with the breaker sweep)."""


@dataclass(frozen=True, slots=True)
class DurableState:
    """A kind of durable state an upper layer keeps beside the breakers: restored whenever
    they are (cold start, a store back after an outage, a store that lost its data) and swept
    with them. ``name`` is what the log calls it."""

    name: str
    restore: DurableRestore
    sweep: DurableSweep | None = None


def _no_names(ids: Collection[int]) -> Mapping[int, str]:
    return {}


async def _no_policies() -> HealthPolicies:
    return HealthPolicies()


def _no_admission() -> dict[str, Any]:
    return {"gates": [], "queues": []}


@dataclass(frozen=True, slots=True)
class RoutingHooks:
    """Everything resilience calls back into routing for. ``expired_recheck`` runs in the
    background every re-check interval (never while ``None``); ``connection_writer`` is
    ``None`` until routing hands in its write (the write is then logged and skipped)."""

    connection_names: ConnectionNames = _no_names
    expired_recheck: Callable[[], object] | None = None
    connection_writer: ConnectionWriter | None = None
    health_policies: PolicySource = _no_policies
    admission_stats: AdmissionSource = _no_admission
    durable_states: tuple[DurableState, ...] = ()


@dataclass(slots=True)
class _Installed:
    current: RoutingHooks


_installed = _Installed(RoutingHooks())


def install_hooks(installed: RoutingHooks) -> None:
    """Make ``installed`` the hooks resilience reads (once, from ``RoutingConfig.ready``)."""
    _installed.current = installed


def hooks() -> RoutingHooks:
    """The installed hooks (the do-nothing defaults before start-up)."""
    return _installed.current


@contextmanager
def replaced_hooks(**changes: Any) -> Iterator[RoutingHooks]:
    """For tests: the installed hooks with ``changes`` applied (field names as keywords) for
    the length of the block, the previous ones restored after it."""
    previous = _installed.current
    _installed.current = dataclasses.replace(previous, **changes)
    try:
        yield _installed.current
    finally:
        _installed.current = previous
