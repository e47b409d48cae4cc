"""The attempt loop: try a plan's targets in order until one answers.

Later mechanisms plug in at its seams (``routing.seams``) without touching the loop: eligibility
filters (their exclusions explain the decision), holders (a refusal is request-scoped), outcome
recorders (the first hands the outcome to the resilience attribution service, whose verdict
says whether the loop moves on), and per request a payload rewrite, finishers and a keep-alive.
A target's attempts go through the hedger when there is one (``routing.hedging``): it may
start the next target beside a stream slow to send its first token (spec decision 24).

The order of last resorts (spec decisions 14, 15, 20): the attempt policy on the current target
(``resilience.domain.attempt_policy``); the next eligible target; one retry of the last after a
transient failure; one panic attempt when only self-set timers excluded every target; the
combo cooldown-aware wait (``routing.cooldown_wait``) and another pass; the emergency fallback
model. The request's deadline bounds all of it, and the loop fails over only while nothing has
reached the client (the consumer relays a reply after the loop returned it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from resilience.domain.attempt_policy import AttemptPolicy, Decision, Failure, Step, decide
from resilience.domain.breaker import Permit
from resilience.domain.connection_state import ConnectionState
from resilience.services.attribution import Verdict
from resilience.services.lockouts import LockRecord
from routing.attempt_limits import limits_for
from routing.cooldown_wait import QUOTA_EXHAUSTED, cooldown_wait, no_keep_alive
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.endpoints import CHAT_COMPLETIONS, Endpoint
from routing.domain.errors import GatewayError
from routing.domain.lease_routing import LeaseClaim
from routing.domain.outcomes import Outcome, OutcomeKind, should_fail_over
from routing.domain.planning import (
    RoutePlan,
    Target,
    plan_route,
    same_model_first,
    serves_same_model,
)
from routing.payload import encode_for_target
from routing.seams import (
    EligibilityFilter,
    Exclusion,
    Finisher,
    Hedger,
    Held,
    Holder,
    HoldRefused,
    OutcomeRecorder,
    Restater,
    Rewrite,
    execution_limit,
    keep_local,
    release_all,
)
from routing.streams import SLOW_FIRST_TOKEN
from routing.upstream import Forwarded, Upstream, UpstreamReply

__all__ = [  # the seams' types are re-exported for the guards that implement them
    "AttemptContext", "AttemptLoop", "AttemptResult", "EligibilityFilter", "Exclusion",
    "Holder", "OutcomeRecorder", "Restater", "limits_for",
]  # fmt: skip

DEADLINE = "request deadline"
logger = logging.getLogger(__name__)

# Indirections so tests can run the policy's waits and the deadline on a fake clock.
now: Callable[[], float] = time.monotonic
pause: Callable[[float], Awaitable[None]] = asyncio.sleep
jitter: Callable[[], float] = random.random


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
    verdicts: dict[tuple[int, str], Verdict] = field(default_factory=dict)  # the last, by pair
    lock_records: dict[int, LockRecord] = field(default_factory=dict)  # by connection
    connection_states: dict[int, ConnectionState] = field(default_factory=dict)  # as selected
    exclusions: list[Exclusion] = field(default_factory=list)
    attempts: list[tuple[Target, Outcome]] = field(default_factory=list)
    retries: dict[tuple[int, str], int] = field(default_factory=dict)  # by (connection, model)
    panic: bool = False
    stopped: bool = False  # the policy returned a failure to the client
    deadline_at: float = math.inf  # monotonic; ``attempts.deadlineMs`` or the client's header
    deadline_hit: bool = False
    endpoint: Endpoint = CHAT_COMPLETIONS  # the client API asked
    forwarded: Forwarded = ()  # client headers the endpoint passes upstream
    tools: int = 0  # how many tools the request declares
    fallback: str | None = None  # the emergency fallback model, once it was tried
    waits: int = 0  # cooldown-aware waits done (routing.cooldown_wait)
    waited_ms: float = 0.0
    before_wait: Callable[[], Awaitable[None]] = no_keep_alive  # a stream's keep-alive
    pass_start: int = 0  # where the current pass's attempts begin
    on_finish: list[Finisher] = field(default_factory=list)  # run when the request ends
    notes: list[str] = field(default_factory=list)  # decision-header parts (routing.preludes)
    rewrite: Rewrite | None = None  # what a strategy changes in the payload per target
    lease: LeaseClaim | None = None  # a managed key's lease, fenced before every attempt
    pinned: bool = False  # the plan was narrowed to the connection of a previous response
    hedge: Target | None = None  # the target started beside a slow one (routing.hedging)
    # A probe claim taken for a pair, to give back at once when its attempt is cancelled.
    probe_releases: dict[tuple[int, str], Callable[[], Awaitable[None]]] = field(
        default_factory=dict
    )
    policy: AttemptPolicy = field(init=False)  # the combo's, or the global: __post_init__

    def __post_init__(self) -> None:
        self.policy = self.snapshot.attempt_policy(self.plan.combo)

    @property
    def last_outcome(self) -> Outcome | None:
        return self.attempts[-1][1] if self.attempts else None

    def verdict(self, target: Target) -> Verdict | None:
        return self.verdicts.get((target.connection.id, target.model))

    def cannot_serve(self, target: Target) -> bool:
        """``target`` answered that it cannot serve this request (model not found, context
        too long): it does not count among the targets able to serve (spec decision 29)."""
        verdict = self.verdict(target)
        return verdict is not None and verdict.attribution.cannot_serve

    def retries_of(self, target: Target) -> int:
        return self.retries.get((target.connection.id, target.model), 0)

    def count_retry(self, target: Target) -> None:
        key = (target.connection.id, target.model)
        self.retries[key] = self.retries.get(key, 0) + 1

    def remaining(self) -> float:
        """Seconds left before the request's deadline."""
        return self.deadline_at - now()

    def out_of_time(self) -> bool:
        if self.remaining() <= 0:
            self.deadline_hit = True
        return self.deadline_hit


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
        holders: Sequence[Holder] = (),
        hedger: Hedger | None = None,
    ) -> None:
        self.upstream = upstream
        self.holders = tuple(holders)
        self.filters = tuple(filters)
        self.recorders = tuple(recorders)
        self.restate = restate
        self.hedger = hedger

    async def run(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Try the plan's targets in order, each as the attempt policy says, until one succeeds,
        the policy stops, or the request's deadline runs out. When every target that could
        serve was held back by timers: wait for an upstream-hinted one to end and try again
        (``routing.cooldown_wait``), then one panic attempt on a self-set one, then the
        emergency fallback model (spec decisions 20 and 29)."""
        while True:
            context.pass_start = len(context.attempts)
            result = await self._pass(context, payload)
            if result.reply is not None or context.stopped or context.out_of_time():
                return result
            wait = cooldown_wait(context)
            if wait is None:
                break
            await context.before_wait()
            await pause(wait)
            context.exclusions.clear()  # the next pass explains itself
        if not self._tried_a_server(context):
            result = await self._panic(context, payload)
            if result.reply is not None or context.stopped or context.out_of_time():
                return result
        return await self._fallback(context, payload)

    async def _pass(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """One pass over the plan: its targets, then a retry of the last one tried that could
        serve the request. After a short upstream hint, the targets serving the same model on
        other connections move to the front of what is left (an equivalent account answers
        now, before a target that would change the model)."""
        last: Target | None = None
        rest = list(context.plan.targets)
        while rest:
            target = rest.pop(0)
            if context.out_of_time():
                return AttemptResult()
            if await self.excluded(target, context):
                continue
            result = await self._try_target(target, context, payload, rest)
            if result.reply is not None or context.stopped:
                return result
            if not context.cannot_serve(target):
                last = target
            if self._short_hint(target, context):
                rest = same_model_first(rest, target)
        if last is not None:
            return await self._retry(last, context, payload)
        return AttemptResult()

    def _tried_a_server(self, context: AttemptContext) -> bool:
        """The last pass tried a target that could serve the request (not only ones that
        answered model not found or context too long)."""
        tried = context.attempts[context.pass_start :]
        return any(not context.cannot_serve(target) for target, _ in tried)

    def _short_hint(self, target: Target, context: AttemptContext) -> bool:
        """``target`` just refused with a short upstream hint, and the request may go to an
        equivalent account for it (a managed request stays on its binding and waits the hint
        out: its lease moves only when the binding becomes ineligible)."""
        if context.lease is not None:
            return False
        verdict = context.verdict(target)
        hint = verdict.hint_ms if verdict is not None else None
        return hint is not None and 0 < hint <= context.policy.max_retry_after_wait_ms

    async def _try_target(
        self,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        rest: list[Target],
    ) -> AttemptResult:
        """One target: an attempt, then the policy's retries of it (``rest``: the targets
        left after it in this pass; a hedge takes the one it starts from it)."""
        while True:
            if self.hedger is None:
                result = await self.attempt(target, context, payload)
            else:
                result = await self.hedger.attempt(self, target, context, payload, rest)
            if result.reply is not None:
                return result
            decision = self._decide(target, context, rest)
            if decision.step is Step.STOP:
                context.stopped = True
                return result
            if decision.step is Step.NEXT:
                return result
            context.count_retry(target)
            if decision.wait_seconds > 0:
                await pause(decision.wait_seconds)
            if context.out_of_time() or await self.excluded(target, context):
                return result

    def _decide(self, target: Target, context: AttemptContext, rest: Sequence[Target]) -> Decision:
        verdict = context.verdict(target)
        # The target's own last outcome: a hedge beside it may have ended after it.
        outcome = next((o for t, o in reversed(context.attempts) if t == target), None)
        if verdict is None:  # no recorder said anything: the outcome alone decides
            moves = outcome is not None and should_fail_over(outcome)
            return Decision(Step.NEXT if moves else Step.STOP)
        connection_level = outcome is not None and outcome.kind in (
            OutcomeKind.NETWORK_ERROR, OutcomeKind.TIMEOUT,
        )  # fmt: skip
        reopen = (
            outcome is not None
            and outcome.stream_started
            and context.snapshot.stream_recovery.enabled
        )
        # A quota 429 moves on even with a short Retry-After (the spec's fail-over table).
        hint_ms = None if verdict.attribution.reason == QUOTA_EXHAUSTED else verdict.hint_ms
        failure = Failure(verdict.fail_over, verdict.transient, connection_level, reopen, hint_ms)
        return decide(
            failure,
            context.policy,
            retries_used=context.retries_of(target),
            others_left=bool(rest),
            remaining_seconds=context.remaining(),
            jitter=jitter(),
            same_model_left=self._short_hint(target, context)
            and any(serves_same_model(target, other) for other in rest),
        )

    async def attempt(
        self,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        holds: list[Held] | None = None,
    ) -> AttemptResult:
        """One attempt on ``target``, recorded, with what the holders grant held while it runs
        (until its stream ends, for a stream); a stream is read up to its first token within
        the time-to-first-token limit, and everything within the request's deadline. ``holds``:
        what the holders granted already (a hedge admitted without queueing)."""
        if holds is None:
            holds = await self._acquire(target, context)
        if holds is None:
            return AttemptResult()
        try:
            result = await self._dispatch(target, context, payload, holds)
        except BaseException:
            await release_all(holds)
            raise
        if result.reply is not None and result.reply.stream is not None:
            result.reply.on_close.append(lambda: release_all(holds))  # when the stream ends
        else:
            await release_all(holds)
        return result

    async def _acquire(self, target: Target, context: AttemptContext) -> list[Held] | None:
        """What every holder grants, or ``None`` when one refused (recorded as a local,
        request-scoped outcome) or the deadline ran out while waiting."""
        holds: list[Held] = []
        if not self.holders:
            return holds
        remaining = context.remaining()
        try:
            async with asyncio.timeout(None if math.isinf(remaining) else remaining):
                for holder in self.holders:
                    holds.append(await holder.acquire(target, context))
        except HoldRefused as refused:
            await release_all(holds)
            keep_local(target, refused.outcome(), context)
            context.stopped = context.stopped or refused.stops
            return None
        except TimeoutError:
            await release_all(holds)
            context.deadline_hit = True
            context.attempts.append((target, Outcome(OutcomeKind.TIMEOUT, detail=DEADLINE)))
            return None
        except BaseException:
            await release_all(holds)
            raise
        return holds

    async def _dispatch(
        self,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        holds: list[Held],
    ) -> AttemptResult:
        if context.rewrite is not None:
            payload = context.rewrite(payload, target)
        body = encode_for_target(payload, target)
        limits, first_token = limits_for(target, context)
        execution = execution_limit(holds)
        if execution is not None:
            limits = replace(limits, headers_seconds=execution)
        budget = context.remaining()
        deadline_bound = budget <= first_token
        try:
            async with asyncio.timeout(min(budget, first_token)):
                outcome, reply = await self.upstream.send(
                    target, body, stream=context.stream, limits=limits,
                    endpoint=context.endpoint, forwarded=context.forwarded,
                )  # fmt: skip
        except TimeoutError:
            if deadline_bound:  # the request's deadline ran out: the client's, not a failure
                context.deadline_hit = True
                context.attempts.append((target, Outcome(OutcomeKind.TIMEOUT, detail=DEADLINE)))
                return AttemptResult()
            outcome, reply = Outcome(OutcomeKind.TIMEOUT, detail=SLOW_FIRST_TOKEN), None
        if outcome.kind is OutcomeKind.LOCAL:  # the execution limit: the gateway's, not its
            keep_local(target, outcome, context)
            return AttemptResult()
        try:
            if self.restate is not None:
                outcome = self.restate(target, outcome, context)
            context.attempts.append((target, outcome))
            if reply is not None and reply.stream is not None:
                reply.outcome = outcome  # recorded when the stream ends (routing.recovery)
            else:
                await self._record(target, outcome, context)
        except BaseException:  # cancelled, or a recorder failed: never leak the stream
            if reply is not None:
                await reply.aclose()
            raise
        return AttemptResult(target, reply) if reply is not None else AttemptResult()

    async def _retry(
        self, target: Target, context: AttemptContext, payload: dict[str, object]
    ) -> AttemptResult:
        """Decision 14: a transient failure with no other target left that answered is retried
        (if its retries are not spent already)."""
        verdict = context.verdict(target)
        allowed = context.policy.retries_per_target
        if verdict is None or not verdict.transient or context.retries_of(target) >= allowed:
            return AttemptResult()
        if context.out_of_time() or await self.excluded(target, context):
            return AttemptResult()
        context.count_retry(target)
        return await self.attempt(target, context, payload)

    async def _panic(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Decisions 15 and 29: every target that could serve was held back by timers → one
        attempt anyway on the target whose self-set timer ends first (it is also that timer's
        probe). Timers of other classes keep their own targets out but do not prevent it."""
        exclusions = [e for e in context.exclusions if e.panic_overridable and not e.held_back]
        if not context.snapshot.availability.panic_enabled or not exclusions:
            return AttemptResult()
        first = min(exclusions, key=lambda e: e.retry_after_seconds or 0.0)
        if await self.excluded(first.target, context, panic=True):
            return AttemptResult()
        context.panic = True
        return await self.attempt(first.target, context, payload)

    async def _fallback(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Decision 20, step 5: every target failed or was excluded → the emergency fallback
        model of the request's wire format, each of its eligible targets not tried yet once."""
        model = context.snapshot.emergency_fallback.get(context.endpoint.wire_format)
        if model is None or model == context.plan.requested_model or context.out_of_time():
            return AttemptResult()
        try:
            plan = plan_route(context.snapshot, model, context.key, context.endpoint.wire_format)
        except GatewayError as error:  # unknown, not allowed for this key, or no connection
            logger.warning("emergency fallback %s unusable: %s", model, error.message)
            return AttemptResult()
        tried = {(t.connection.id, t.model) for t, _ in context.attempts}
        for target in plan.targets:
            if (target.connection.id, target.model) in tried or context.out_of_time():
                continue
            if await self.excluded(target, context, panic=True):  # its own exclusions: unlisted
                continue
            context.fallback = model
            result = await self.attempt(target, context, payload)
            if result.reply is not None:
                return result
        return AttemptResult()

    async def excluded(
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

    async def record_failure(
        self, target: Target, outcome: Outcome, context: AttemptContext
    ) -> None:
        """Record a failure found after the attempt answered (a stream that broke)."""
        context.attempts.append((target, outcome))
        await self._record(target, outcome, context)

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        """Record an outcome whose recording was deferred (a stream's success)."""
        await self._record(target, outcome, context)

    async def _record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        for recorder in self.recorders:
            await recorder.record(target, outcome, context)
