"""After commit: the client's stream is finished, or ended honestly, never duplicated or cut
silently.

:class:`StreamRelay` sends a committed stream to the client. When the upstream breaks or stalls
before the answer finished, the broken attempt is recorded as a failure and the next target
(the same one again when no other is left) is asked to finish the answer:

1. a model whose catalog entry accepts an assistant prefill gets the original messages plus an
   assistant message holding the text already sent, and only its continuation is relayed;
2. any other model (``no`` or ``unknown``) regenerates from the original request; when the
   regenerated text begins with exactly what the client has, only the rest is relayed (the text
   before that point is held back, never sent twice); when it differs, the next target is tried;
3. when no target can finish it (or ``streamRecovery.continueMidStream`` is off, or the answer
   carried a tool call or several choices, or more text than the gateway keeps for this:
   ``RECOVERY_TEXT_MAX_CHARS``), the stream ends with an in-band error event carrying
   the original failure, and no ``[DONE]``.

Each remaining target is asked at most once, each attempt bounded by its time-to-first-token and
idle limits. From commit on, the request's default deadline (``attempts.deadlineMs``) no longer
applies: a long healthy answer is never cut. A deadline the client set
(``X-OmniRoute-Deadline-Ms``) does: when it passes, the stream ends with an in-band
``request_deadline_exceeded`` error and no ``[DONE]``, and the segment being relayed is
recorded as when the client leaves (the upstream was answering), never as its failure. When
the process starts to stop, the consumer cancels the relay (the segment being relayed is
recorded the same way) and ends the stream with an in-band ``server_shutting_down`` error and
no ``[DONE]`` (:meth:`StreamRelay.shutdown_error`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import httpx

from omniroute.core.stopping import SHUTTING_DOWN
from routing.domain.client.usage import NO_TOKENS, Tokens, added
from routing.domain.config.vocabulary import Prefill
from routing.domain.plan.planning import Target
from routing.domain.streams.sse import SseEvent
from routing.domain.streams.state import Kind, NotSpliceable, SentText, Splicing, StreamState
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext
from routing.proxy.stream_clock import ClientDeadline
from routing.proxy.streams import StreamBroken, Transform, UpstreamStream, forward
from routing.proxy.upstream.client import UpstreamReply
from routing.proxy.upstream.errors import classify_transport_error, describe_transport_error

logger = logging.getLogger(__name__)

INTERRUPTED = "upstream_stream_interrupted"
DEADLINE_EXCEEDED = "request_deadline_exceeded"
SHUTDOWN_MESSAGE = "The gateway is shutting down; the answer ends here."
Send = Callable[[bytes], Awaitable[None]]
Finish = Callable[[], Awaitable[None]]


class Diverged(NotSpliceable):
    """A regenerated answer does not begin with the text the client already has."""


class Continuation:
    """The events of a continuation, rewritten into the client's stream; keeps the text sent.
    ``trim``: leading whitespace of the continuation that repeats what the client has (a
    prefill may not end in whitespace, so the model writes it again)."""

    def __init__(self, envelope: dict[str, Any] | None, splicing: Splicing, trim: int = 0) -> None:
        self.envelope = envelope
        self.splicing = splicing
        self.trim = trim
        self.sent = SentText()  # bounded: a stream of any length holds little of its text

    def __call__(self, event: SseEvent, kind: Kind, payload: dict[str, Any] | None) -> bytes | None:
        if payload is None:
            return event.raw if kind is Kind.DONE else None
        return self._emit(payload, self._trimmed(payload))

    def _trimmed(self, payload: dict[str, Any]) -> int:
        if not self.trim:
            return 0
        text = self.splicing.content_of(payload)
        if not text:
            return 0
        skip = min(self.trim, len(text) - len(text.lstrip()))
        self.trim = 0  # only the start of the continuation repeats it
        return skip

    def _emit(self, payload: dict[str, Any], skip: int) -> bytes | None:
        text = self.splicing.content_of(payload)[skip:]
        out = self.splicing.continuation_event(payload, self.envelope, skip=skip)
        if text and out is not None:
            self.sent.append(text)
        return out


class Splice(Continuation):
    """A regeneration: held back until it has repeated ``prefix`` exactly, then relayed."""

    def __init__(self, prefix: str, envelope: dict[str, Any] | None, splicing: Splicing) -> None:
        super().__init__(envelope, splicing)
        self.prefix = prefix
        self.matched = 0

    def __call__(self, event: SseEvent, kind: Kind, payload: dict[str, Any] | None) -> bytes | None:
        need = len(self.prefix) - self.matched
        if need <= 0:
            return super().__call__(event, kind, payload)
        if payload is None:
            if kind is Kind.DONE:
                raise Diverged("the regenerated answer ended before the text already sent")
            return None
        text = self.splicing.content_of(payload)
        if not self.prefix.startswith(text[:need], self.matched):
            raise Diverged("the regenerated answer differs from the text already sent")
        if len(text) >= need:  # the prefix is complete: relay the rest of this chunk on
            self.matched = len(self.prefix)
            return self._emit(payload, need)
        self.matched += len(text)
        if self.splicing.finishes(payload):
            raise Diverged("the regenerated answer ended before the text already sent")
        return None


class StreamRelay:
    """Relays one committed stream to the client, through every segment that finishes it.

    Each segment's attempt is recorded exactly once, when the segment ends: a success when it
    finished (or a regeneration was set aside, or the client left), a failure when it broke.
    """

    def __init__(
        self,
        loop: AttemptLoop,
        context: AttemptContext,
        payload: dict[str, Any],
        client: tuple[Send, Finish],
        target: Target,
        reply: UpstreamReply,
        deadline_at: float = math.inf,
    ) -> None:
        self.loop, self.context, self.payload = loop, context, payload
        self.deadline_at = deadline_at  # the client's (``attempts.now()``), else none
        self.send, self.finish = client
        self.told: list[str] = []  # the assistant text the client has
        self.envelope: dict[str, Any] | None = None  # id, model... of the first stream
        self._first = (target, reply)
        self._pending: tuple[Target, UpstreamReply] | None = (target, reply)  # not yet recorded
        self._segments: list[StreamState] = []  # the state of each stream relayed, in order

    @property
    def tokens(self) -> Tokens:
        """The tokens the usage of every stream relayed reported, together."""
        tokens = NO_TOKENS
        for state in self._segments:
            tokens = added(tokens, (state.tokens_in, state.tokens_out))
        return tokens

    async def run(self) -> None:
        """Relay the first reply (whose head the client has been sent already) to its end."""
        target, reply = self._first
        stream = reply.stream
        assert stream is not None
        self.envelope = stream.state.envelope
        transform: Transform = forward
        candidates: Iterator[Target] | None = None
        first_failure: StreamBroken | None = None
        client_deadline = self._commit()
        while True:
            self._segments.append(stream.state)
            stream.clock.deadline_at = client_deadline
            try:
                async for part in stream.relay(transform):
                    await self.send(part)
                await self.finish()
                await stream.drain()  # so that the pooled connection is reused
                await self.settle()
                return
            except ClientDeadline:  # the client's limit, not the upstream's failure
                self.context.loop.deadline_hit = True
                await self.settle()
                break
            except StreamBroken as broken:
                failure: StreamBroken | None = broken
            except (httpx.TransportError, aiohttp.ClientError) as exc:
                failure = StreamBroken(classify_transport_error(exc), describe_transport_error(exc))
            except NotSpliceable as diverged:  # the rest of this segment is not ours to use
                logger.info("request %s: %s", self.context.facts.request_id, diverged)
                failure = None
                if isinstance(transform, Continuation):
                    self.told += transform.sent  # what of it reached the client before
                await self.settle()  # the upstream answered
            finally:
                await reply.aclose()
            if failure is not None:
                await self._broke(target, failure)
                first_failure = first_failure or failure
                self._count(stream, transform)
                if not self._continuable(stream):
                    break
            if candidates is None:
                candidates = self._candidates(target)
            found = await self._next(candidates)
            if found is None:
                break
            target, reply, transform = found
            stream = reply.stream
            assert stream is not None
        await self.send(
            self._deadline_error() if self.context.loop.deadline_hit else self._error(first_failure)
        )
        await self.finish()

    def _commit(self) -> float | None:
        """From the first token on only the client's deadline bounds the request; when it set
        one, its ``time.monotonic()`` equivalent for the streams' clocks."""
        self.context.loop.deadline_at, self.context.loop.deadline_hit = self.deadline_at, False
        remaining = self.context.loop.remaining()
        return None if math.isinf(remaining) else time.monotonic() + remaining

    async def settle(self) -> None:
        """Record the current segment's attempt as a success, if nothing recorded it yet (also
        when the client left mid-stream: the upstream was answering)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[1].outcome is not None:
            await self.loop.record(pending[0], pending[1].outcome, self.context)

    async def _broke(self, target: Target, failure: StreamBroken) -> None:
        logger.warning(
            "request %s: upstream stream broke after commit (%s on %s)",
            self.context.facts.request_id,
            failure.detail,
            target.label,
        )
        self._pending = None
        await self.loop.record_failure(target, failure.outcome(), self.context)

    def _count(self, stream: UpstreamStream, transform: Transform) -> None:
        """Add what the broken segment sent to the text the client has."""
        if isinstance(transform, Continuation):
            self.told += transform.sent
        else:
            self.told += stream.state.text

    @property
    def splicing(self) -> Splicing:
        splicing = self.context.facts.endpoint.splicing
        assert splicing is not None  # _continuable said so
        return splicing

    def _continuable(self, stream: UpstreamStream) -> bool:
        recovery = self.context.facts.snapshot.stream_recovery
        return (
            recovery.continue_mid_stream
            and stream.state.continuable
            and not stream.state.text.overflowed  # too long to send back or repeat
            and self.context.facts.endpoint.splicing is not None
        )

    def _candidates(self, failed: Target) -> Iterator[Target]:
        """The targets after the one that broke; that one again when none is left."""
        targets = self.context.plan.targets
        index = next((i for i, t in enumerate(targets) if t is failed), len(targets))
        later = targets[index + 1 :]
        return iter(later or (failed,))

    async def _next(
        self, candidates: Iterator[Target]
    ) -> tuple[Target, UpstreamReply, Transform] | None:
        """The next target that answers, with the transform that splices it in; its head (what
        it sent before its first token) is sent to the client already."""
        text = "".join(self.told)
        for target in candidates:
            context = self.context
            if context.loop.out_of_time() or await self.loop.excluded(target, context):
                continue
            prefill = self._accepts_prefill(target)
            body, trim = self.payload, 0
            if prefill and text:
                body, trim = self.splicing.with_prefill(self.payload, text)
            reply = (await self.loop.attempt(target, context, body)).reply
            if reply is None:
                continue
            self._pending = (target, reply)
            transform: Continuation = (
                Continuation(self.envelope, self.splicing, trim)
                if prefill or not text
                else Splice(text, self.envelope, self.splicing)
            )
            try:
                assert reply.stream is not None
                head = [p for o in reply.stream.head_events if (p := transform(*o)) is not None]
                if head:
                    await self.send(b"".join(head))
            except NotSpliceable as diverged:
                logger.info("request %s: %s", context.facts.request_id, diverged)
                await self.settle()
                await reply.aclose()
                continue
            except BaseException:  # the client left, or worse: never leak the upstream stream
                await reply.aclose()
                raise
            return target, reply, transform
        return None

    def _accepts_prefill(self, target: Target) -> bool:
        entry = self.context.facts.snapshot.catalog_entry(target.provider.slug, target.model)
        return entry is not None and entry.accepts_prefill == Prefill.YES

    def _error(self, failure: StreamBroken | None) -> bytes:
        detail = failure.detail if failure is not None else "no target could finish the answer"
        message = (
            f"The upstream stream broke after the answer began ({detail}), "
            "and no target could finish it."
        )
        return self._first_state.error_event(message, INTERRUPTED)  # in the client API's shape

    def _deadline_error(self) -> bytes:
        message = (
            "The deadline the client set (X-OmniRoute-Deadline-Ms) ran out while the answer "
            "was streamed."
        )
        return self._first_state.error_event(message, DEADLINE_EXCEEDED)

    def shutdown_error(self) -> bytes:
        """The in-band error ending the stream when the process starts to stop."""
        return self._first_state.error_event(SHUTDOWN_MESSAGE, SHUTTING_DOWN)

    @property
    def _first_state(self) -> StreamState:
        first = self._first[1].stream
        assert first is not None
        return first.state
