"""The attempt loop: try a plan's targets in order until one answers.

Later mechanisms plug in at two seams, without touching the loop:

* an **eligibility filter** looks at a target before dispatch and may exclude it with a reason
  (breaker open, connection cooling down, model locked, lease fence, ...). Exclusions are kept
  and explain the routing decision to the client.
* an **outcome recorder** sees every attempt's outcome (breaker counts, cooldowns, lockouts).

The loop fails over only while nothing has reached the client: the consumer relays a reply
after the loop has returned it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from resilience.domain.breaker import Permit
from resilience.domain.connection_state import ConnectionState, Marked
from resilience.services.lockouts import LockRecord
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.outcomes import Outcome, should_fail_over
from routing.domain.planning import RoutePlan, Target
from routing.payload import encode_for_target
from routing.upstream import Upstream, UpstreamReply


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Why a target was skipped without being tried."""

    target: Target
    reason: str
    retry_after_seconds: float | None = None

    def describe(self) -> str:
        return f"{self.target.label}@{self.target.connection.id}:{self.reason}"


@dataclass(slots=True)
class AttemptContext:
    """One client request as the filters and recorders see it."""

    request_id: str
    key: KeyInfo
    plan: RoutePlan
    stream: bool
    snapshot: ConfigSnapshot = field(default_factory=ConfigSnapshot)
    started: float = field(default_factory=time.monotonic)
    permits: dict[str, Permit] = field(default_factory=dict)
    marks: dict[tuple[int, str], Marked] = field(default_factory=dict)  # by (connection, model)
    lock_records: dict[int, LockRecord] = field(default_factory=dict)  # by connection
    connection_states: dict[int, ConnectionState] = field(default_factory=dict)  # as selected
    exclusions: list[Exclusion] = field(default_factory=list)
    attempts: list[tuple[Target, Outcome]] = field(default_factory=list)

    @property
    def last_outcome(self) -> Outcome | None:
        return self.attempts[-1][1] if self.attempts else None


class EligibilityFilter(Protocol):
    """Decides, before dispatch, whether a target may be tried now."""

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None: ...


class OutcomeRecorder(Protocol):
    """Records what one attempt produced (state changes live behind it)."""

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None: ...


Restater = Callable[[Target, Outcome, "AttemptContext"], Outcome]
"""Rewrites a failed outcome before anything reads it (status restatement)."""


@dataclass(slots=True)
class AttemptResult:
    """The winning target and its reply, or ``None`` when every target failed or was skipped."""

    target: Target | None = None
    reply: UpstreamReply | None = None


class AttemptLoop:
    """Runs a plan against the upstream through the filters and recorders."""

    def __init__(
        self,
        upstream: Upstream,
        filters: Sequence[EligibilityFilter] = (),
        recorders: Sequence[OutcomeRecorder] = (),
        restate: Restater | None = None,
    ) -> None:
        self.upstream = upstream
        self.filters = tuple(filters)
        self.recorders = tuple(recorders)
        self.restate = restate

    async def run(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Try each eligible target once, in plan order, until one succeeds or must stop."""
        for target in context.plan.targets:
            if await self._excluded(target, context):
                continue
            body = encode_for_target(payload, target)
            outcome, reply = await self.upstream.send(target, body, stream=context.stream)
            try:
                if self.restate is not None:
                    outcome = self.restate(target, outcome, context)
                context.attempts.append((target, outcome))
                await self._record(target, outcome, context)
            except BaseException:  # cancelled, or a recorder failed: never leak the stream
                if reply is not None:
                    await reply.aclose()
                raise
            if reply is not None:
                return AttemptResult(target, reply)
            if not self._moves_on(target, outcome, context):
                break
        return AttemptResult()

    def _moves_on(self, target: Target, outcome: Outcome, context: AttemptContext) -> bool:
        """Fail over on transport and server failures, and wherever the classifier said so."""
        marked = context.marks.get((target.connection.id, target.model))
        return should_fail_over(outcome) or (marked is not None and marked.fallback)

    async def _excluded(self, target: Target, context: AttemptContext) -> bool:
        for check in self.filters:
            exclusion = await check.exclude(target, context)
            if exclusion is not None:
                context.exclusions.append(exclusion)
                return True
        return False

    async def _record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        for recorder in self.recorders:
            await recorder.record(target, outcome, context)
