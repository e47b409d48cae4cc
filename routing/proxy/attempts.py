"""The attempt loop: try a plan's targets in order until one answers.

Later mechanisms plug in at its seams (``routing.proxy.seams``) without touching the loop:
eligibility
filters (their exclusions explain the decision), holders (a refusal is request-scoped), outcome
recorders (the first hands the outcome to the resilience attribution service, whose verdict
says whether the loop moves on), and per request a payload rewrite, finishers and a keep-alive.
A target's attempts go through the hedger when there is one (``routing.proxy.hedging``): it may
start the next target beside a stream slow to send its first token.

The order of last resorts: the attempt policy on the current target
(``resilience.domain.attempts.policy``); the next eligible target; one retry of the last after a
transient failure; one panic attempt when only self-set timers excluded every target; the
combo cooldown-aware wait (``routing.proxy.cooldown_wait``) and another pass; the emergency fallback
model. The request's deadline bounds all of it, and the loop fails over only while nothing has
reached the client (the consumer relays a reply after the loop returned it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import replace

from omniroute.core.store import StateStore
from resilience.domain.attempts.policy import Decision, Failure, Step, decide
from routing.domain.attempts.outcomes import Outcome, OutcomeKind, should_fail_over
from routing.domain.client.errors import GatewayError
from routing.domain.client.requests import refuses_usage_request, without_usage_request
from routing.domain.plan.planning import (
    Target,
    plan_route,
    same_model_first,
    serves_same_model,
)
from routing.proxy import clock
from routing.proxy.attempt_limits import limits_for
from routing.proxy.context import AttemptContext
from routing.proxy.cooldown_wait import QUOTA_EXHAUSTED, cooldown_wait
from routing.proxy.payload import encode_for_target
from routing.proxy.seams import (
    AttemptResult,
    EligibilityFilter,
    Hedger,
    Held,
    Holder,
    HoldRefused,
    OutcomeRecorder,
    ReadsAhead,
    Restater,
    acquire_all,
    execution_limit,
    keep_local,
    release_all,
)
from routing.proxy.streams import SLOW_FIRST_TOKEN
from routing.proxy.upstream.client import AttemptLimits, Upstream, UpstreamReply

DEADLINE = "request deadline"
logger = logging.getLogger(__name__)


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
        store: StateStore | None = None,
    ) -> None:
        self.upstream = upstream
        self.holders = tuple(holders)
        self.filters = tuple(filters)
        # The filters whose records are read ahead, in one round trip (needs the store).
        self.readers = tuple(f for f in self.filters if isinstance(f, ReadsAhead))
        self.store = store
        self.recorders = tuple(recorders)
        self.restate = restate
        self.hedger = hedger

    async def run(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Try the plan's targets in order, each as the attempt policy says, until one succeeds,
        the policy stops, or the request's deadline runs out. When every target that could
        serve was held back by timers: wait for an upstream-hinted one to end and try again
        (``routing.proxy.cooldown_wait``), then one panic attempt on a self-set one, then the
        emergency fallback model."""
        while True:
            context.loop.pass_start = len(context.loop.attempts)
            result = await self._pass(context, payload)
            if result.reply is not None or context.loop.stopped or context.loop.out_of_time():
                return result
            wait = cooldown_wait(context)
            if wait is None:
                break
            await context.before_wait()
            await clock.pause(wait)
            context.loop.exclusions.clear()  # the next pass explains itself
        if not self._tried_a_server(context):
            result = await self._panic(context, payload)
            if result.reply is not None or context.loop.stopped or context.loop.out_of_time():
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
            if context.loop.out_of_time():
                return AttemptResult()
            if await self.excluded(target, context):
                continue
            result = await self._try_target(target, context, payload, rest)
            if result.reply is not None or context.loop.stopped:
                return result
            if not context.loop.cannot_serve(target):
                last = target
            if self._short_hint(target, context):
                rest = same_model_first(rest, target)
        if last is not None:
            return await self._retry(last, context, payload)
        return AttemptResult()

    def _tried_a_server(self, context: AttemptContext) -> bool:
        """The last pass tried a target that could serve the request (not only ones that
        answered model not found or context too long)."""
        tried = context.loop.attempts[context.loop.pass_start :]
        return any(not context.loop.cannot_serve(target) for target, _ in tried)

    def _short_hint(self, target: Target, context: AttemptContext) -> bool:
        """``target`` just refused with a short upstream hint, and the request may go to an
        equivalent account for it (a managed request stays on its binding and waits the hint
        out: its lease moves only when the binding becomes ineligible)."""
        if context.lease is not None:
            return False
        verdict = context.loop.verdict(target)
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
                context.loop.stopped = True
                return result
            if decision.step is Step.NEXT:
                return result
            context.loop.count_retry(target)
            if decision.wait_seconds > 0:
                await clock.pause(decision.wait_seconds)
            if context.loop.out_of_time() or await self.excluded(target, context):
                return result

    def _decide(self, target: Target, context: AttemptContext, rest: Sequence[Target]) -> Decision:
        verdict = context.loop.verdict(target)
        # The target's own last outcome: a hedge beside it may have ended after it.
        outcome = next((o for t, o in reversed(context.loop.attempts) if t == target), None)
        if verdict is None:  # no recorder said anything: the outcome alone decides
            moves = outcome is not None and should_fail_over(outcome)
            return Decision(Step.NEXT if moves else Step.STOP)
        connection_level = outcome is not None and outcome.kind in (
            OutcomeKind.NETWORK_ERROR,
            OutcomeKind.TIMEOUT,
        )
        reopen = (
            outcome is not None
            and outcome.stream_started
            and context.facts.snapshot.stream_recovery.enabled
        )
        # A quota 429 moves on even with a short Retry-After: the quota will not reset that soon.
        hint_ms = None if verdict.attribution.reason == QUOTA_EXHAUSTED else verdict.hint_ms
        failure = Failure(verdict.fail_over, verdict.transient, connection_level, reopen, hint_ms)
        return decide(
            failure,
            context.policy,
            retries_used=context.loop.retries_of(target),
            others_left=bool(rest),
            remaining_seconds=context.loop.remaining(),
            jitter=clock.jitter(),
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
        """What every holder that applies grants, or ``None`` when one refused (recorded as a
        local, request-scoped outcome) or the deadline ran out while waiting."""
        remaining = context.loop.remaining()
        seconds = None if math.isinf(remaining) else remaining
        try:
            return await acquire_all(self.holders, target, context, seconds)
        except HoldRefused as refused:
            keep_local(target, refused.outcome(), context)
            context.loop.stopped = context.loop.stopped or refused.stops
            return None
        except TimeoutError:
            context.loop.deadline_hit = True
            context.loop.attempts.append((target, Outcome(OutcomeKind.TIMEOUT, detail=DEADLINE)))
            return None

    async def _send(
        self,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        limits: AttemptLimits,
    ) -> tuple[Outcome, UpstreamReply | None]:
        """One upstream send. A provider that refuses the usage request the gateway added
        (``stream_options``: a server that knows no such parameter) gets the request again
        without it at once, and is not asked for usage again by this process; its streams then
        go without token counts (docs/operating.md)."""
        asked = context.facts.hides_usage  # the gateway, not the client, asked for usage
        refused = self.upstream.usage_refused
        if asked and target.provider.slug in refused:
            payload = without_usage_request(payload)

        async def send(payload: dict[str, object]) -> tuple[Outcome, UpstreamReply | None]:
            return await self.upstream.send(
                target,
                encode_for_target(payload, target),
                stream=context.facts.stream,
                limits=limits,
                endpoint=context.facts.endpoint,
                forwarded=context.facts.forwarded,
                hide_usage=asked,
            )

        outcome, reply = await send(payload)
        if asked and "stream_options" in payload:
            if refuses_usage_request(outcome.status, outcome.body):
                refused.add(target.provider.slug)
                logger.warning(
                    "%s refused stream_options; its streams go without usage", target.label
                )
                outcome, reply = await send(without_usage_request(payload))
        return outcome, reply

    async def _dispatch(
        self,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        holds: list[Held],
    ) -> AttemptResult:
        if context.rewrite is not None:
            payload = context.rewrite(payload, target)
        limits, first_token = limits_for(target, context)
        execution = execution_limit(holds)
        if execution is not None:
            limits = replace(limits, headers_seconds=execution)
        budget = context.loop.remaining()
        deadline_bound = budget <= first_token
        times = context.attempt_times
        started = time.time_ns() if times is not None else 0
        try:
            async with asyncio.timeout(min(budget, first_token)):
                outcome, reply = await self._send(target, context, payload, limits)
        except TimeoutError:
            if times is not None:
                times.append((target, started, time.time_ns()))
            if deadline_bound:  # the request's deadline ran out: the client's, not a failure
                context.loop.deadline_hit = True
                context.loop.attempts.append(
                    (target, Outcome(OutcomeKind.TIMEOUT, detail=DEADLINE))
                )
                return AttemptResult()
            outcome, reply = Outcome(OutcomeKind.TIMEOUT, detail=SLOW_FIRST_TOKEN), None
        else:
            if times is not None:
                times.append((target, started, time.time_ns()))
        if outcome.kind is OutcomeKind.LOCAL:  # the execution limit: the gateway's, not its
            keep_local(target, outcome, context)
            return AttemptResult()
        try:
            if self.restate is not None:
                outcome = self.restate(target, outcome, context)
            context.loop.attempts.append((target, outcome))
            if reply is not None and reply.stream is not None:
                reply.outcome = outcome  # recorded when the stream ends (routing.proxy.recovery)
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
        """A transient failure with no other target left that answered is retried
        (if its retries are not spent already)."""
        verdict = context.loop.verdict(target)
        allowed = context.policy.retries_per_target
        if verdict is None or not verdict.transient or context.loop.retries_of(target) >= allowed:
            return AttemptResult()
        if context.loop.out_of_time() or await self.excluded(target, context):
            return AttemptResult()
        context.loop.count_retry(target)
        return await self.attempt(target, context, payload)

    async def _panic(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Panic: every target that could serve was held back by timers → one
        attempt anyway on the target whose self-set timer ends first (it is also that timer's
        probe). Timers of other classes keep their own targets out but do not prevent it."""
        exclusions = [e for e in context.loop.exclusions if e.panic_overridable and not e.held_back]
        if not context.facts.snapshot.availability.panic_enabled or not exclusions:
            return AttemptResult()
        first = min(exclusions, key=lambda e: e.retry_after_seconds or 0.0)
        if await self.excluded(first.target, context, panic=True):
            return AttemptResult()
        context.loop.panic = True
        return await self.attempt(first.target, context, payload)

    async def _fallback(self, context: AttemptContext, payload: dict[str, object]) -> AttemptResult:
        """Last resort: every target failed or was excluded → the emergency fallback
        model of the request's wire format, each of its eligible targets not tried yet once."""
        model = context.facts.snapshot.emergency_fallback.get(context.facts.endpoint.wire_format)
        if model is None or model == context.plan.requested_model or context.loop.out_of_time():
            return AttemptResult()
        try:
            plan = plan_route(
                context.facts.snapshot, model, context.facts.key, context.facts.endpoint.wire_format
            )
        except GatewayError as error:  # unknown, not allowed for this key, or no connection
            logger.warning("emergency fallback %s unusable: %s", model, error.message)
            return AttemptResult()
        tried = {(t.connection.id, t.model) for t, _ in context.loop.attempts}
        for target in plan.targets:
            if (target.connection.id, target.model) in tried or context.loop.out_of_time():
                continue
            if await self.excluded(target, context, panic=True):  # its own exclusions: unlisted
                continue
            context.loop.fallback = model
            result = await self.attempt(target, context, payload)
            if result.reply is not None:
                return result
        return AttemptResult()

    async def excluded(
        self, target: Target, context: AttemptContext, *, panic: bool = False
    ) -> bool:
        if self.readers and self.store is not None:
            keys = [key for reader in self.readers for key in reader.reads(target)]
            values = await self.store.get_many(keys)
            context.loop.read_ahead = dict(zip(keys, values, strict=True))
        try:
            for check in self.filters:
                exclusion = await check.exclude(target, context)
                if exclusion is None or (panic and exclusion.panic_overridable):
                    continue
                if not panic:
                    context.loop.exclusions.append(exclusion)
                return True
            return False
        finally:
            context.loop.read_ahead.clear()  # read for this check only

    async def record_failure(
        self, target: Target, outcome: Outcome, context: AttemptContext
    ) -> None:
        """Record a failure found after the attempt answered (a stream that broke)."""
        context.loop.attempts.append((target, outcome))
        await self._record(target, outcome, context)

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        """Record an outcome whose recording was deferred (a stream's success)."""
        await self._record(target, outcome, context)

    async def _record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None:
        for recorder in self.recorders:
            await recorder.record(target, outcome, context)
