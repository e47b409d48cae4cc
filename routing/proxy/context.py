"""One client request as the proxy's steps see it (docs/architecture.md, "One request").

Three parts, each with one writer:

* :class:`RequestFacts`: what the client asked, as authenticated and parsed. Fixed from the
  moment the pipeline opens the request's context; nothing writes it afterwards.
* the plan (``AttemptContext.plan``): the targets in the order they will be tried. The
  ordering steps write it (the combo's strategy, session affinity, a managed key's lease, the
  fusion and pipeline preludes); the attempt loop only reads it.
* :class:`LoopState`: what the attempt loop (``routing.proxy.attempts``) and its guards
  learned while trying the plan: attempts, exclusions, verdicts, retries, waits, the deadline.

Beside them, what steps plug in for the rest of the request: finishers run when it ends, a
per-target payload rewrite, a keep-alive before a wait, the decision header's notes, and the
lease a managed request holds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from leases.interface import LeaseClaim
from omniroute.core.bounds import clip
from omniroute.core.store import Json
from resilience.domain.attempts.policy import AttemptPolicy
from resilience.domain.attribution import PANIC_OVERRIDABLE, TimerClass
from resilience.domain.breaker.machine import Permit
from resilience.domain.connection_state import ConnectionState
from resilience.domain.lock_record import LockRecord
from resilience.services.attribution import Verdict
from routing.domain.attempts.outcomes import Outcome
from routing.domain.client.endpoints import CHAT_COMPLETIONS, Endpoint
from routing.domain.config.snapshot import ConfigSnapshot, KeyInfo
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import RoutePlan, Target
from routing.proxy import clock
from routing.proxy.upstream.client import Forwarded

HELD_BACK = frozenset({ExclusionReason.FALLBACK_ONLY, ExclusionReason.LEASE_BOUND})


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Why a target was skipped without being tried, and the class of the timer behind it."""

    target: Target
    reason: str
    retry_after_seconds: float | None = None
    timer: str = TimerClass.OPERATOR
    # Waiting for another request's probe of the target, to follow it: a short poll that is
    # not one of the request's cooldown waits.
    polling: bool = False

    def describe(self) -> str:
        return f"{clip(self.target.label)}@{self.target.connection.id}:{self.reason}"

    @property
    def panic_overridable(self) -> bool:
        return self.timer in PANIC_OVERRIDABLE

    @property
    def held_back(self) -> bool:
        """Kept out by the request's own route (a fallback-only step, a lease kept on its
        connection), not by any timer: the panic attempt and the cooldown wait look past it."""
        return self.reason in HELD_BACK


# What a strategy changes in the payload for each target.
Rewrite = Callable[[dict[str, object], Target], dict[str, object]]
# Run when the request ends (a sync function, or one returning an awaitable).
Finisher = Callable[[], Awaitable[None] | None]


async def no_keep_alive() -> None:
    """What happens before a wait by default: nothing. A streaming consumer replaces it with
    its keep-alive (``AttemptContext.before_wait``)."""


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the client asked, as authenticated and parsed; fixed for the request's life."""

    request_id: str
    key: KeyInfo
    stream: bool
    snapshot: ConfigSnapshot = field(default_factory=ConfigSnapshot)
    endpoint: Endpoint = CHAT_COMPLETIONS  # the client API asked
    forwarded: Forwarded = ()  # client headers the endpoint passes upstream
    tools: int = 0  # how many tools the request declares
    hides_usage: bool = False  # its stream goes without the usage the gateway asked for
    pinned: bool = False  # the plan was narrowed to the connection of a previous response
    started: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class LoopState:
    """What the attempt loop and its guards learned while trying the plan (their writes)."""

    permits: dict[str, Permit] = field(default_factory=dict)
    verdicts: dict[tuple[int, str], Verdict] = field(default_factory=dict)  # the last, by pair
    lock_records: dict[int, LockRecord] = field(default_factory=dict)  # by connection
    connection_states: dict[int, ConnectionState] = field(default_factory=dict)  # as selected
    exclusions: list[Exclusion] = field(default_factory=list)
    attempts: list[tuple[Target, Outcome]] = field(default_factory=list)
    retries: dict[tuple[int, str], int] = field(default_factory=dict)  # by (connection, model)
    pass_start: int = 0  # where the current pass's attempts begin
    panic: bool = False
    stopped: bool = False  # the policy returned a failure to the client
    deadline_at: float = math.inf  # monotonic; ``attempts.deadlineMs`` or the client's header
    deadline_hit: bool = False
    fallback: str | None = None  # the emergency fallback model, once it was tried
    waits: int = 0  # cooldown-aware waits done (routing.proxy.cooldown_wait)
    waited_ms: float = 0.0
    hedge: Target | None = None  # the target started beside a slow one (routing.proxy.hedging)
    # The records the filters named (``routing.proxy.seams.ReadsAhead``), read for the check
    # of one target; each filter pops its own.
    read_ahead: dict[str, Json] = field(default_factory=dict)
    # A probe claim taken for a pair, to give back at once when its attempt is cancelled.
    probe_releases: dict[tuple[int, str], Callable[[], Awaitable[None]]] = field(
        default_factory=dict
    )

    @property
    def last_outcome(self) -> Outcome | None:
        return self.attempts[-1][1] if self.attempts else None

    def verdict(self, target: Target) -> Verdict | None:
        return self.verdicts.get((target.connection.id, target.model))

    def cannot_serve(self, target: Target) -> bool:
        """``target`` answered that it cannot serve this request (model not found, context
        too long): it does not count among the targets able to serve."""
        verdict = self.verdict(target)
        return verdict is not None and verdict.attribution.cannot_serve

    def retries_of(self, target: Target) -> int:
        return self.retries.get((target.connection.id, target.model), 0)

    def count_retry(self, target: Target) -> None:
        key = (target.connection.id, target.model)
        self.retries[key] = self.retries.get(key, 0) + 1

    def remaining(self) -> float:
        """Seconds left before the request's deadline."""
        return self.deadline_at - clock.now()

    def out_of_time(self) -> bool:
        if self.remaining() <= 0:
            self.deadline_hit = True
        return self.deadline_hit


@dataclass(slots=True)
class AttemptContext:
    """One client request: its facts, its plan, the attempt loop's state, and what steps
    plugged in for the rest of it."""

    facts: RequestFacts
    plan: RoutePlan
    loop: LoopState = field(default_factory=LoopState)
    on_finish: list[Finisher] = field(default_factory=list)  # run when the request ends
    notes: list[str] = field(default_factory=list)  # decision-header parts
    rewrite: Rewrite | None = None  # what a strategy changes in the payload per target
    before_wait: Callable[[], Awaitable[None]] = no_keep_alive  # a stream's keep-alive
    lease: LeaseClaim | None = None  # a managed key's lease, fenced before every attempt
    # When traced: each upstream send's target and wall-clock start and end (ns), in order.
    attempt_times: list[tuple[Target, int, int]] | None = None
    policy: AttemptPolicy = field(init=False)  # the combo's, or the global

    def __post_init__(self) -> None:
        self.policy = self.facts.snapshot.attempt_policy(self.plan.combo)

    @classmethod
    def start(
        cls,
        request_id: str,
        key: KeyInfo,
        plan: RoutePlan,
        stream: bool,
        snapshot: ConfigSnapshot | None = None,
        **facts: Any,
    ) -> AttemptContext:
        """A new request's context: its facts (``facts``: the optional ones, by name) and its
        plan as resolved, with nothing tried yet."""
        given = RequestFacts(request_id, key, stream, snapshot or ConfigSnapshot(), **facts)
        return cls(given, plan)
