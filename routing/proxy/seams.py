"""The attempt loop's seams (``routing.proxy.attempts``): what plugs in, and how.

* an **eligibility filter** looks at a target before dispatch and may exclude it; one that
  reads known state-store records says which (:class:`ReadsAhead`), and the loop reads them
  for every such filter in one round trip before the filters run;
* a **holder** is what an attempt holds while it runs (a semaphore slot, a place in the local
  request queue): acquired before dispatch, released exactly once: when the attempt failed or
  answered in full, when it was cancelled, or when the stream it answered with ends or
  breaks. A holder may refuse (:class:`HoldRefused`): a local, request-scoped error that the
  loop fails over on and never records against a connection, a model or a breaker;
* an **outcome recorder** sees every attempt's outcome;
* a **restater** rewrites a failed outcome before anything reads it;
* a **hedger** runs a target's attempts, and may start the next target beside a stream that
  is slow to send its first token (``routing.proxy.hedging``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from routing.domain.attempts.admission import local_error_body
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion
from routing.proxy.upstream.client import UpstreamReply


@dataclass(slots=True)
class AttemptResult:
    """The winning target and its reply, or ``None`` when every target failed or was skipped."""

    target: Target | None = None
    reply: UpstreamReply | None = None


class AttemptRunner(Protocol):
    """What a hedger uses of the attempt loop (``routing.proxy.attempts.AttemptLoop``): its
    holders, its eligibility check and one attempt."""

    holders: tuple[Holder, ...]

    async def attempt(
        self,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        holds: list[Held] | None = None,
    ) -> AttemptResult: ...

    async def excluded(
        self, target: Target, context: AttemptContext, *, panic: bool = False
    ) -> bool: ...


class EligibilityFilter(Protocol):
    """Decides, before dispatch, whether a target may be tried now."""

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None: ...


@runtime_checkable
class ReadsAhead(Protocol):
    """An eligibility filter whose check reads state-store records it can name beforehand.

    The loop reads the records of every such filter with one ``get_many`` before the filters
    run and keeps them in ``context.loop.read_ahead`` for that check only: a filter takes its
    record from there (``pop``, ``NOT_READ`` when absent) instead of reading it itself."""

    def reads(self, target: Target) -> tuple[str, ...]: ...


class OutcomeRecorder(Protocol):
    """Records what one attempt produced (state changes live behind it)."""

    async def record(self, target: Target, outcome: Outcome, context: AttemptContext) -> None: ...


Restater = Callable[[Target, Outcome, "AttemptContext"], Outcome]
"""Rewrites a failed outcome before anything reads it (status restatement)."""

"""What a strategy changes in the client's payload for one target (a context handoff)."""

"""Run once when the request ends (a strategy's slot released, its sticky state settled)."""


class Hedger(Protocol):
    """Runs one attempt on ``target`` for the loop, and may race it against a hedge on a
    target it takes from ``rest`` (the targets left in this pass)."""

    async def attempt(
        self,
        loop: AttemptRunner,
        target: Target,
        context: AttemptContext,
        payload: dict[str, object],
        rest: list[Target],
    ) -> AttemptResult: ...


class Held(Protocol):
    """What a holder granted; ``release`` is idempotent."""

    @property
    def execution_seconds(self) -> float | None:
        """A bound on the time from dispatch to the upstream's response headers, if any."""
        ...

    async def release(self) -> None: ...


class Holder(Protocol):
    """Grants what an attempt holds while it runs, or raises :class:`HoldRefused`."""

    def applies(self, target: Target, context: AttemptContext) -> bool:
        """Whether an attempt on ``target`` has anything to acquire here (a cap, a queue, a
        lease): most have nothing, and skip the acquisition and its deadline timer."""
        ...

    async def acquire(self, target: Target, context: AttemptContext) -> Held: ...


class HoldRefused(Exception):
    """A local gate refused the attempt (a full queue, a wait past its limit, a lease that no
    longer holds). With ``stops``, no other target may be tried either: the refusal is about the
    request itself, so it is the answer."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retry_after: int | None = None,
        *,
        error_type: str = "rate_limit_error",
        stops: bool = False,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after
        self.error_type, self.stops, self.extra = error_type, stops, extra or {}

    def outcome(self) -> Outcome:
        headers = {"content-type": "application/json"}
        if self.retry_after is not None:
            headers["retry-after"] = str(self.retry_after)
        body = local_error_body(self.message, self.code, self.error_type, **self.extra)
        return Outcome(OutcomeKind.LOCAL, self.status, headers, body, self.code)


async def acquire_all(
    holders: Sequence[Holder], target: Target, context: AttemptContext, seconds: float | None
) -> list[Held]:
    """What every holder that applies to an attempt on ``target`` grants, in their order, within
    ``seconds`` (``None``: unbounded). When one refuses, the wait runs out (``TimeoutError``) or
    anything else fails, what was granted is released and the failure raised. An attempt none
    applies to holds nothing and arms no timer."""
    holds: list[Held] = []
    applying = [holder for holder in holders if holder.applies(target, context)]
    if not applying:
        return holds
    try:
        async with asyncio.timeout(seconds):
            for holder in applying:
                holds.append(await holder.acquire(target, context))
    except BaseException:
        await release_all(holds)
        raise
    return holds


async def release_all(holds: Sequence[Held]) -> None:
    """Release every hold, each once, whatever happens to the others."""
    failure: BaseException | None = None
    for hold in holds:
        try:
            await hold.release()
        except BaseException as error:  # keep releasing the rest
            failure = failure or error
    if failure is not None:
        raise failure


def execution_limit(holds: Sequence[Held]) -> float | None:
    """The tightest execution bound the holds set."""
    limits = [h.execution_seconds for h in holds if h.execution_seconds is not None]
    return min(limits) if limits else None


def answered_target(context: AttemptContext) -> Target | None:
    """The target whose answer the request got, if one answered (for finishers)."""
    return next((t for t, outcome in reversed(context.loop.attempts) if outcome.ok), None)


def keep_local(target: Target, outcome: Outcome, context: AttemptContext) -> None:
    """Keep a local gate's outcome, never recorded: it says nothing of the target's health,
    so the target's last verdict no longer decides what the loop does next."""
    context.loop.attempts.append((target, outcome))
    context.loop.verdicts.pop((target.connection.id, target.model), None)
