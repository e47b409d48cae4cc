"""Hedging a slow first token: the attempt-policy component the
attempt loop runs a target's attempts through.

A streaming attempt that has sent no first token after the hedge delay gets the next eligible
target of the pass started beside it; both stay open, the first to send a token wins, and the
other is cancelled and awaited before any byte of it reaches the client (its upstream request
is closed, its holds released). A first token is what the stream reader counts as one (text,
reasoning, a tool call, a refusal; not a role-only delta, a comment, a ping or
``message_start``): the attempt answers when it has read up to it.

* **When.** A stream only; a plan with a target left in this pass; at most one hedge per
  request; never for a managed key's request (its lease binds the connection) nor one pinned
  by ``previous_response_id``; while ``hedgeMaxPercent`` of the requested model's attempts in
  the last minute allow one more hedge (``routing.domain.attempts.hedging.HedgeBudget``).
* **The delay** (``routing.domain.attempts.hedging.hedge_delay_ms``): the (provider, model)'s
learned
  first-token time once it has enough samples, else ``hedgeAfterMs`` (catalog entry, combo,
  global); none when it is off at any level. ``attempts.timeToFirstTokenMs`` stays each
  attempt's hard limit.
* **The hedge** takes the next target of the pass that the eligibility filters let through
  (the ones they exclude are skipped for the pass, as the pass would). It takes admission
  like any attempt but never queues: a holder that does not grant at once
  (:data:`ADMISSION_SECONDS`) or refuses means no hedge, and nothing is recorded. It is its
  own attempt (in the request's attempts, the decision header says ``hedge=1``).
* **The race.** The first attempt to answer wins. A failure of one while the other runs
  starts nothing new: the other is awaited. The loser is neither a failure nor a success: it
  reaches no recorder (no pair counter, breaker window or combo metric), its probe claim on
  the pair and its provider breaker's probe slot are given back at once, and the learned
  first-token time gets a sample of at least the time it waited.

Every attempt this component runs that answers gives its first-token time as a sample
(``routing.domain.attempts.hedging.FirstTokenTimes``). With a state store, the samples are merged
into it in the background at most every :data:`SHARE_SECONDS` (``store.update`` with a
merge), and the merged samples replace this process's view, so the processes of a gateway
learn together; no request waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from omniroute.core.store import StateStore
from omniroute.core.store.base import Json
from resilience.domain.breaker.machine import Permit
from resilience.services.breakers import breaker_release
from routing.domain.attempts.hedging import (
    SAMPLE_MAX_AGE_SECONDS,
    FirstTokenTimes,
    HedgeBudget,
    PairKey,
    Sample,
    delay_from_learned,
    learned_delay_ms,
    merge_samples,
)
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext
from routing.proxy.seams import (
    AttemptResult,
    AttemptRunner,
    Held,
    HoldRefused,
    acquire_all,
    release_all,
)

logger = logging.getLogger(__name__)

HEDGE_NOTE = "hedge=1"
ADMISSION_SECONDS = 0.25  # a hold not granted within this is a queue: no hedge
SHARE_SECONDS = 5.0
LEARNED_SECONDS = 1.0  # how long a learned delay is used before it is worked out again
STORE_PREFIX = "first-token:"


@dataclass(eq=False, slots=True)
class _Attempt:
    """One of the racing attempts, with its own state."""

    target: Target
    started: float  # monotonic
    task: asyncio.Task[AttemptResult]
    outcomes: int  # the request's outcomes of this target when it started
    permit: Permit | None  # the provider breaker's permit its eligibility check took
    holds: list[Held] | None = None  # a hedge's, granted before its task started
    settled: bool = False


class Hedging:
    """The hedging component (see the module docstring); one per attempt loop, so one per
    process in the gateway."""

    def __init__(self, store: StateStore | None = None) -> None:
        self.store = store
        self.clock = store.clock if store is not None else time.time
        self.times = FirstTokenTimes()
        self.budget = HedgeBudget()
        self._shared_at = 0.0
        self._learned: dict[PairKey, tuple[float, int | None]] = {}  # (worked out at, delay)
        self._sharing: asyncio.Task[None] | None = None

    async def attempt(
        self,
        loop: AttemptRunner,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        rest: list[Target],
    ) -> AttemptResult:
        self.budget.count(context.plan.requested_model, self.clock())
        delay_ms = self.delay_ms(target, context, rest)
        if delay_ms is None:
            result = await loop.attempt(target, context, payload)
            self._answered(target, result)
            return result
        first = self._start(loop, target, context, payload)
        racing = [first]
        try:
            if await _done_within(first.task, delay_ms / 1000):  # the usual case: in time
                first.settled = True
                result = first.task.result()
                self._answered(target, result)
                return result
            hedge = await self._hedge(loop, context, payload, rest, first)
            if hedge is not None:
                racing.append(hedge)
            return await self._race(racing, context)
        finally:
            await self._settle_losers(racing, context)

    def delay_ms(
        self, target: Target, context: AttemptContext, rest: Sequence[Target]
    ) -> int | None:
        """How long ``target``'s attempt may wait for its first token before a hedge, or
        ``None`` when this attempt is not hedged."""
        if not context.facts.stream or context.loop.hedge is not None or not rest:
            return None
        if context.lease is not None or context.facts.pinned:
            return None
        entry = context.facts.snapshot.catalog_entry(target.provider.slug, target.model)
        now = self.clock()
        self._share_soon(now)
        catalog_ms = entry.hedge_after_ms if entry is not None else None
        return delay_from_learned(context.policy, catalog_ms, self._learned_ms(target, now))

    def _learned_ms(self, target: Target, now: float) -> int | None:
        """The pair's learned delay, worked out again at most once a second once there is one
        (every streaming request asks for it; the samples change slowly)."""
        key = _pair(target)
        cached = self._learned.get(key)
        if cached is not None and cached[1] is not None and now - cached[0] < LEARNED_SECONDS:
            return cached[1]  # until a delay is learned, every new sample counts at once
        learned = learned_delay_ms(self.times.times(key, now))
        self._learned[key] = (now, learned)
        return learned

    def _start(
        self,
        loop: AttemptRunner,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        holds: list[Held] | None = None,
    ) -> _Attempt:
        outcomes = sum(t == target for t, _ in context.loop.attempts)
        permit = context.loop.permits.get(target.provider.slug)
        task = asyncio.create_task(loop.attempt(target, context, payload, holds))
        return _Attempt(target, time.monotonic(), task, outcomes, permit, holds)

    async def _hedge(
        self,
        loop: AttemptRunner,
        context: AttemptContext,
        payload: dict[str, object],
        rest: list[Target],
        first: _Attempt,
    ) -> _Attempt | None:
        """The hedge beside ``first``: the next eligible target of ``rest``, admitted without
        queueing, or ``None``."""
        model = context.plan.requested_model
        if not self.budget.allows(model, context.policy.hedge_max_percent, self.clock()):
            return None
        while rest and not first.task.done():
            candidate = rest[0]
            if await loop.excluded(candidate, context):
                rest.pop(0)  # the pass would skip it as well
                continue
            holds = await self._admit(loop, candidate, context)
            if holds is None or first.task.done():  # no free slot, or no longer needed
                if holds is not None:
                    await release_all(holds)
                return None
            rest.pop(0)
            context.loop.hedge = candidate
            context.notes.append(HEDGE_NOTE)
            self.budget.count(model, self.clock(), hedge=True)
            return self._start(loop, candidate, context, payload, holds)
        return None

    async def _admit(
        self, loop: AttemptRunner, target: Target, context: AttemptContext
    ) -> list[Held] | None:
        """What every holder grants at once, or ``None`` (nothing recorded: a hedge that could
        not start is no attempt)."""
        try:
            return await acquire_all(loop.holders, target, context, ADMISSION_SECONDS)
        except (HoldRefused, TimeoutError):
            return None

    async def _race(self, racing: list[_Attempt], context: AttemptContext) -> AttemptResult:
        """The first answer of the racing attempts, or no answer when every one failed."""
        winner: AttemptResult | None = None
        while winner is None:
            for attempt in racing:
                if not attempt.task.done() or attempt.settled:
                    continue
                attempt.settled = True
                result = attempt.task.result()
                self._answered(attempt.target, result)
                if result.reply is None:
                    continue  # a failure, recorded as usual: the other runs on
                if winner is None:
                    winner = result
                    self._keep_permit(attempt, context)
                else:  # answered in the same moment as the winner: a loser
                    await self._discard(attempt, result, context)
            running = [a.task for a in racing if not a.task.done()]
            if winner is not None or not running:
                break
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        return winner or AttemptResult()

    async def _settle_losers(self, racing: list[_Attempt], context: AttemptContext) -> None:
        """Cancel and await every attempt still running; an answer that came meanwhile is
        discarded. Neither is recorded anywhere."""
        for attempt in racing:
            if not attempt.task.done() and not self._recording(attempt, context):
                attempt.task.cancel()
        for attempt in racing:
            if attempt.settled:
                continue
            attempt.settled = True
            try:
                result = await attempt.task
            except asyncio.CancelledError:
                await self._cancelled(attempt, context)
                continue
            except Exception:
                logger.exception("request %s: a hedged attempt failed", context.facts.request_id)
                continue
            self._answered(attempt.target, result)
            if result.reply is not None:
                await self._discard(attempt, result, context)

    @staticmethod
    def _keep_permit(attempt: _Attempt, context: AttemptContext) -> None:
        """The winner's stream is recorded when it ends, with its own breaker permit (the
        hedge's eligibility check may have replaced it for the same provider)."""
        if attempt.permit is not None:
            context.loop.permits[attempt.target.provider.slug] = attempt.permit

    @staticmethod
    def _recording(attempt: _Attempt, context: AttemptContext) -> bool:
        """The attempt has its outcome and is recording it (a failure): let it finish, a
        recorder is never cut in the middle."""
        return sum(t == attempt.target for t, _ in context.loop.attempts) > attempt.outcomes

    async def _cancelled(self, attempt: _Attempt, context: AttemptContext) -> None:
        """A loser cancelled before its first token: it waited at least this long, and any
        probe claim it held on its pair goes back at once."""
        waited_ms = (time.monotonic() - attempt.started) * 1000
        self.times.add(_pair(attempt.target), waited_ms, self.clock())
        if attempt.holds is not None:  # a task cancelled before it ran never released them
            await release_all(attempt.holds)
        await self._give_back(attempt, context)

    async def _discard(
        self, attempt: _Attempt, result: AttemptResult, context: AttemptContext
    ) -> None:
        """A loser that answered: never relayed, never recorded (taken out of the request's
        attempts), its stream closed and its holds released."""
        reply = result.reply
        assert reply is not None
        context.loop.attempts[:] = [
            (t, o)
            for t, o in context.loop.attempts
            if not (t == attempt.target and o is reply.outcome)
        ]
        await reply.aclose()
        await self._give_back(attempt, context)

    async def _give_back(self, attempt: _Attempt, context: AttemptContext) -> None:
        """A loser's probes, with no result: its claim on the pair and its breaker slot."""
        release = context.loop.probe_releases.pop(_slot(attempt.target), None)
        if release is not None:
            await release()
        if self.store is not None and attempt.permit is not None and attempt.permit.probe:
            slug = attempt.target.provider.slug
            await breaker_release(store=self.store, name=slug, permit=attempt.permit)

    def _answered(self, target: Target, result: AttemptResult) -> None:
        """A stream that answered gives its first-token time as a sample."""
        reply = result.reply
        if reply is None or reply.stream is None or reply.outcome is None:
            return
        if reply.outcome.latency_ms is not None:
            now = self.clock()
            self.times.add(_pair(target), reply.outcome.latency_ms, now)
            self._share_soon(now)

    # --- sharing the samples ------------------------------------------------------------------

    def _share_soon(self, now: float) -> None:
        """Merge this process's samples into the store in the background, at most every
        :data:`SHARE_SECONDS`."""
        if self.store is None or now - self._shared_at < SHARE_SECONDS:
            return
        if self._sharing is not None and not self._sharing.done():
            return
        self._shared_at = now
        self._sharing = asyncio.get_running_loop().create_task(self.share())

    async def share(self) -> None:
        """Merge the samples added here into the store and take the merged ones back, for
        every (provider, model) this process has seen. Best effort: a store that fails keeps
        this process on its own samples until the next time."""
        store = self.store
        if store is None:
            return
        new = self.times.take_new()
        for pair in {*self.times.keys(), *new}:
            added = new.get(pair, [])
            try:
                now = store.clock()
                merged = await store.update(
                    _store_key(pair),
                    partial(_merged, added=added, now=now),
                    ttl=SAMPLE_MAX_AGE_SECONDS,
                )
            except Exception:
                logger.warning("first-token times of %s/%s not shared", *pair, exc_info=True)
                continue
            self.times.replace(pair, _samples(merged))


def _pair(target: Target) -> PairKey:
    return (target.provider.slug, target.model)


def _slot(target: Target) -> tuple[int, str]:
    return (target.connection.id, target.model)


def _store_key(pair: PairKey) -> str:
    return f"{STORE_PREFIX}{pair[0]}:{pair[1]}"


def _samples(raw: Json | None) -> list[Sample]:
    """The samples of a stored value, leniently (anything unusable is left out)."""
    if not isinstance(raw, list):
        return []
    samples: list[Sample] = []
    for item in raw:
        if isinstance(item, list) and len(item) == 2:
            at, ms = item
            if isinstance(at, int | float) and isinstance(ms, int | float):
                samples.append((float(at), float(ms)))
    return samples


def _merged(raw: Json | None, added: list[Sample], now: float) -> Json | None:
    merged = merge_samples(_samples(raw), added, now)
    return [[at, ms] for at, ms in merged] or None


async def stop_sharing(hedging: Hedging) -> None:
    """Wait for a share in progress (tests, shutdown)."""
    task = hedging._sharing
    if task is not None:
        with contextlib.suppress(Exception):
            await task


async def _done_within(task: asyncio.Task[AttemptResult], seconds: float) -> bool:
    """Whether ``task`` is done within ``seconds`` (it keeps running either way). Every
    hedgeable stream waits here, so it is lighter than ``asyncio.wait``: one future, one
    timer and one callback."""
    if task.done():
        return True
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = asyncio.get_running_loop().call_later(seconds, wake)
    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    return task.done()
