"""A fusion panel asked in parallel.

Every member is asked through the ordinary attempt loop with its own context (its targets
only), so eligibility, admission, the attempt policy and recording apply to each ask as to any
request. The wait ends when every member has finished; or, once ``quorum`` members answered,
after at most the stragglers' grace; and in any case at the panel's hard limit (never past the
request's deadline). Members still running then are cancelled: their upstream requests are
closed and their holds released by the attempt loop, nothing is recorded against them, and no
task outlives the panel, even when the client leaves (the consumer cancels the whole prelude).

The panel's time is the event loop's own clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from routing.domain.client.conversations import Conversation, Payload
from routing.domain.plan.planning import Target
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext
from routing.proxy.preludes.common import Reading, failure_reason, read_reply

logger = logging.getLogger(__name__)

CUT_OFF = "no answer within the panel's time"
NO_TEXT = "answered without text"


@dataclass(slots=True)
class Ask:
    """One panel member's ask: its context, then its answer or why it has none."""

    context: AttemptContext
    target: Target | None = None
    reading: Reading | None = None
    failure: str = CUT_OFF

    @property
    def label(self) -> str:
        """The member as the client's error message names it (never the judge's prompt)."""
        return self.context.plan.targets[0].label

    @property
    def text(self) -> str | None:
        return self.reading.text if self.reading is not None else None


@dataclass(frozen=True, slots=True)
class PanelTimes:
    """How many answers start the stragglers' grace, and the panel's time limits (seconds)."""

    quorum: int
    grace_seconds: float
    limit_seconds: float


async def ask_panel(
    loop: AttemptLoop,
    asks: Sequence[Ask],
    payload: Payload,
    conversation: Conversation,
    times: PanelTimes,
) -> None:
    """Ask every member in parallel and fill in each :class:`Ask`; returns once the wait is
    over and every member's task has ended."""
    tasks = [asyncio.create_task(_ask(loop, ask, payload, conversation)) for ask in asks]
    try:
        await _wait(tasks, asks, times)
    finally:
        for task in tasks:
            task.cancel()  # a finished task ignores it
        ended = await asyncio.gather(*tasks, return_exceptions=True)
    for ask, end in zip(asks, ended, strict=True):
        if isinstance(end, Exception):
            logger.error("fusion panel member %s failed", ask.label, exc_info=end)
            ask.failure = "the gateway failed to ask it"


async def _ask(loop: AttemptLoop, ask: Ask, payload: Payload, conversation: Conversation) -> None:
    result = await loop.run(ask.context, payload)
    if result.reply is None:
        ask.failure = failure_reason(ask.context)
        return
    reading = await read_reply(result, conversation)
    if not reading.text:
        ask.failure = NO_TEXT
        return
    ask.target, ask.reading = result.target, reading


async def _wait(
    tasks: Sequence[asyncio.Task[None]], asks: Sequence[Ask], times: PanelTimes
) -> None:
    """Until every task ended, or the grace after the quorum, or the limit, passed."""
    clock = asyncio.get_running_loop().time
    end = clock() + times.limit_seconds
    graced = False
    pending: set[asyncio.Task[None]] = set(tasks)
    while pending:
        timeout = max(0.0, end - clock())
        done, pending = await asyncio.wait(
            pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:  # the time is up
            return
        if not graced and sum(ask.text is not None for ask in asks) >= times.quorum:
            graced, end = True, min(end, clock() + times.grace_seconds)
