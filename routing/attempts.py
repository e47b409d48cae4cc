"""The attempt loop: try a plan's targets in order until one answers.

Later mechanisms plug in at two seams, without touching the loop:

* an **eligibility filter** looks at a target before dispatch and may exclude it with a reason
  and the class of the timer behind it (breaker open, connection cooling down, pair locked,
  lease fence, ...). Exclusions are kept and explain the routing decision to the client.
* an **outcome recorder** sees every attempt's outcome; the first one hands it to the
  resilience attribution service, whose verdict says whether the loop moves on.

The order of last resorts (spec decisions 14, 15, 20): the next eligible target; after a
transient failure with no other target left, one retry of the same target; when every target
was excluded only by self-set timers, one panic attempt on the target whose timer ends first.
The loop fails over only while nothing has reached the client: the consumer relays a reply
after the loop has returned it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from resilience.domain.attribution import PANIC_OVERRIDABLE, TimerClass
from resilience.domain.breaker import Permit
from resilience.domain.connection_state import ConnectionState, Marked
from resilience.services.attribution import Verdict
from resilience.services.lockouts import LockRecord
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.outcomes import Outcome, should_fail_over
from routing.domain.planning import RoutePlan, Target
from routing.payload import encode_for_target
from routing.upstream import Upstream, UpstreamReply


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Why a target was skipped without being tried, and the class of the timer behind it."""

    target: Target
    reason: str
    retry_after_seconds: float | None = None
    timer: str = TimerClass.OPERATOR

    def describe(self) -> str:
        return f"{self.target.label}@{self.target.connection.id}:{self.reason}"

    @property
    def panic_overridable(self) -> bool:
        return self.timer in PANIC_OVERRIDABLE


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
    verdicts: dict[tuple[int, str], Verdict] = field(default_factory=dict)  # the last, by pair
    lock_records: dict[int, LockRecord] = field(default_factory=dict)  # by connection
    connection_states: dict[int, ConnectionState] = field(default_factory=dict)  # as selected
    exclusions: list[Exclusion] = field(default_factory=list)
    attempts: list[tuple[Target, Outcome]] = field(default_factory=list)
    retries: int = 0
    panic: bool = False

    @property
    def last_outcome(self) -> Outcome | None:
        return self.attempts[-1][1] if self.attempts else None

    def verdict(self, target: Target) -> Verdict | None:
        return self.verdicts.get((target.connection.id, target.model))


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
        last: Target | None = None
        for target in context.plan.targets:
            if await self._excluded(target, context):
                continue
            result = await self._attempt(target, context, payload)
            if result.reply is not None:
                return result
            last = target
            if not self._moves_on(target, context):
                return result
        if last is not None:
            return await self._retry(last, context, payload)
        return await self._panic(context, payload)

    async def _attempt(
        self, target: Target, context: AttemptContext, payload: dict[str, object]
    ) -> AttemptResult:
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
        return AttemptResult(target, reply) if reply is not None else AttemptResult()

    async def _retry(
        self, target: Target, context: AttemptContext, payload: dict[str, object]
    ) -> AttemptResult:
        """Decision 14: a transient failure with no other target left is retried (once by
        default: ``attempts.retriesPerTarget``)."""
        allowed = context.snapshot.availability.retries_per_target
        result = AttemptResult()
        while context.retries < allowed:
            verdict = context.verdict(target)
            if verdict is None or not verdict.transient:
                break
            context.retries += 1
            if await self._excluded(target, context):  # e.g. that failure completed a run
                break
            result = await self._attempt(target, context, payload)
            if result.reply is not None:
                break
        return result

    async def _panic(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Decision 15: every target excluded by self-set timers only → one attempt anyway, on
        the target whose timer ends first (it is also that timer's probe)."""
        exclusions = context.exclusions
        if not context.snapshot.availability.panic_enabled or not exclusions:
            return AttemptResult()
        if not all(e.panic_overridable for e in exclusions):
            return AttemptResult()
        first = min(exclusions, key=lambda e: e.retry_after_seconds or 0.0)
        if await self._excluded(first.target, context, panic=True):
            return AttemptResult()
        context.panic = True
        return await self._attempt(first.target, context, payload)

    def _moves_on(self, target: Target, context: AttemptContext) -> bool:
        """Fail over wherever the attribution said another target may answer."""
        verdict = context.verdict(target)
        if verdict is not None:
            return verdict.fail_over
        outcome = context.last_outcome
        return outcome is not None and should_fail_over(outcome)

    async def _excluded(
        self, target: Target, context: AttemptContext, *, panic: bool = False
    ) -> bool:
        for check in self.filters:
            exclusion = await check.exclude(target, context)
            if exclusion is None or (panic and exclusion.panic_overridable):
                continue
            if not panic:
                context.exclusions.append(exclusion)
            return True
        return False

    async def _record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        for recorder in self.recorders:
            await recorder.record(target, outcome, context)
