"""What leases needs of routing, handed in at start-up (docs/routing.md, "Exclusive leases").

To acquire a lease, the lease API asks routing for what only routing knows: which client key a
request presents, which connections may serve a model for that key (its credential selection),
and which of them are cooling down or terminal. Leases may not import routing (the layers point
one way), so routing fills one :class:`RoutingAccess` from its app's ``ready`` and
:func:`install` keeps it; :func:`routing_access` reads it. What crosses is plain data or the
small types declared here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from leases.domain.claims import LeaseKey
from resilience.domain.connection_state import ConnectionState

Headers = Iterable[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class LeaseCandidate:
    """One connection an acquire may bind, in the model's plan order: its id, its provider's
    slug and its durable state (the configuration's copy; the live one comes from
    ``RoutingAccess.connection_states``)."""

    connection_id: int
    provider: str
    state: ConnectionState


class KeyRefusal(StrEnum):
    """Why a lease request has no usable key: none was presented, or it does not authenticate
    (unknown, revoked, expired or inactive)."""

    MISSING = "missing"
    INVALID = "invalid"


class KeyRouting(Protocol):
    """Routing's answers about one authenticated key, all from the one configuration snapshot
    it was authenticated against."""

    @property
    def key(self) -> LeaseKey:
        """The authenticated key."""
        ...

    def check_model(self, model: str) -> None:
        """Raise the ``GatewayError`` the lease API answers when ``model`` does not resolve or
        the key may not use it."""
        ...

    def candidates(self, model: str) -> tuple[LeaseCandidate, ...]:
        """The connections the key may use for ``model``, one each, in the model's plan order
        across every wire format."""
        ...

    def display_names(self, provider: str, connection_id: int) -> tuple[str | None, str]:
        """A connection's configured name (``None`` when unknown) and its provider's display
        name (the slug when unknown)."""
        ...


@dataclass(frozen=True, slots=True)
class RoutingAccess:
    """The callables routing fills at start-up for leases.

    ``authenticate`` reads the current configuration and the key the request's headers
    present; ``connection_states`` gives each connection's live state over the durable ones it
    is given, as the attempt loop's connection filter sees them (sync callers only);
    ``connection_names`` names connections by id (unknown ones left out; sync callers only)."""

    authenticate: Callable[[Headers, datetime], Awaitable[KeyRouting | KeyRefusal]]
    connection_states: Callable[[Mapping[int, ConnectionState]], Mapping[int, ConnectionState]]
    connection_names: Callable[[Collection[int]], Mapping[int, str]] = lambda ids: {}


_installed: list[RoutingAccess] = []


def install(access: RoutingAccess) -> None:
    """Keep routing's access for the lease API (routing's ``AppConfig.ready``, once; a second
    call replaces the first)."""
    _installed[:] = [access]


def routing_access() -> RoutingAccess:
    """The access routing installed; a ``RuntimeError`` before it did."""
    if not _installed:
        raise RuntimeError("routing has not installed its access for leases yet")
    return _installed[0]


@contextmanager
def replaced_routing_access(access: RoutingAccess) -> Iterator[RoutingAccess]:
    """For tests: ``access`` instead of the installed one, until the block ends."""
    previous = list(_installed)
    _installed[:] = [access]
    try:
        yield access
    finally:
        _installed[:] = previous
