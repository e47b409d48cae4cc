"""One upstream stream, read event by event: held back until its first token, then relayed.

Before commit (:meth:`UpstreamStream.head`) the stream is read until its first token: role-only
deltas and heartbeats are held back, so a stream that never says anything fails over like a
silent upstream (the attempt's time-to-first-token limit bounds this phase). After commit
(:meth:`UpstreamStream.relay`) events go to the client as they come, with these rules:

* a malformed event (data that is not a JSON object, or a field of a type its observer cannot
  read) is dropped and logged; the stream goes on;
* a body that ends after the answer finished but without its end marker (``data: [DONE]``,
  ``message_stop``) ends the client's stream at once with the gateway's own; one that stays open
  after the finish and the usage block (or ``FINISH_GRACE_SECONDS`` after the finish) is ended
  the same way;
* a body that ends before the answer finished, a reset, an idle stall, an in-band error event
  or the throughput watchdog raise :class:`StreamBroken`: the attempt failed after commit, and
  recovery decides what the client sees next. The stream is idle once it has sent nothing that
  changes the answer (text, reasoning or tool-call deltas, a refusal, a finish, usage) for
  ``idle_seconds`` (``attempts.streamIdleMs``): comments, pings and empty deltas do not count
  (:class:`routing.proxy.stream_clock.StreamClock`);
* once the deadline the client set passes (``clock.deadline_at``, set by the relay) the read
  ends with :class:`routing.proxy.stream_clock.ClientDeadline`: not the upstream's failure.

Before and after commit, one event larger than the gateway's limit on one event
(``max_event_bytes``: ``OMNIROUTE_MAX_SSE_EVENT_BYTES``) fails the attempt like a plain answer
over the body limit (a 502 ``upstream_response_too_large``); its bytes are never held past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx
import orjson

from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.streams.chat import ChatStream
from routing.domain.streams.sse import SseEvent, SseSplitter
from routing.domain.streams.state import Kind, StreamState
from routing.domain.streams.throughput import THROUGHPUT_TOO_LOW, ThroughputWatchdog, useful_bytes
from routing.proxy.stream_clock import IdleLimit, StreamClock

logger = logging.getLogger(__name__)

FINISH_GRACE_SECONDS = 0.5
DRAIN_SECONDS = 0.05
ENDED_BEFORE_FIRST_TOKEN = "stream ended before the first token"
SLOW_FIRST_TOKEN = "time to first token"
EVENT_TOO_LARGE = "stream event too large"
STREAM_IDLE = "stream idle"
# What changes the answer, and so restarts the idle limit (as does a finish: ``state.finished``).
_ANSWERING = frozenset({Kind.TOKEN, Kind.USAGE, Kind.DONE})
_TOO_LARGE = {
    "message": "The upstream sent a stream event larger than the gateway's limit on one event.",
    "type": "upstream_error",
    "code": "upstream_response_too_large",
}
_TOO_LARGE_BODY = orjson.dumps({"error": _TOO_LARGE})
Observed = tuple[SseEvent, Kind, dict[str, Any] | None]
Transform = Callable[[SseEvent, Kind, dict[str, Any] | None], bytes | None]
"""Turns one observed event into the bytes the client gets (``None``: nothing)."""


class StreamBroken(Exception):
    """The stream failed: before its first token, or after commit."""

    def __init__(self, kind: OutcomeKind, detail: str, body: bytes = b"") -> None:
        super().__init__(detail)
        self.kind, self.detail, self.body = kind, detail, body

    def outcome(self, latency_ms: int = 0, *, started: bool = False) -> Outcome:
        status = 502 if self.kind is OutcomeKind.HTTP_ERROR else None
        headers = {"content-type": "application/json"} if self.body else {}
        return Outcome(
            self.kind, status, headers, self.body, self.detail, latency_ms, stream_started=started
        )


def forward(event: SseEvent, kind: Kind, payload: dict[str, Any] | None) -> bytes | None:
    return event.raw or None  # empty: the state removed it (a usage block the client did not ask)


class UpstreamStream:
    """An upstream's event stream and what it has said (``state``)."""

    def __init__(
        self,
        first: bytes,
        chunks: AsyncIterator[bytes],
        watchdog: ThroughputWatchdog | None = None,
        label: str = "",
        state: StreamState | None = None,
        *,
        max_event_bytes: int | None = None,
        idle_seconds: float | None = None,
    ) -> None:
        self.state: StreamState = state if state is not None else ChatStream()
        self.clock = StreamClock(idle_seconds)  # bounds the reads after commit
        self.head_events: list[Observed] = []
        self._chunks = chunks
        self._watchdog = watchdog
        self._splitter = SseSplitter(max_event_bytes)
        self._first = first
        self._label = label
        self._done = False  # data: [DONE] seen
        self._late_error = False  # an in-band error after the answer finished: its end
        self._broken: StreamBroken | None = None  # raised once what preceded it is relayed
        self._eof = False  # the body ended
        self._committed = False  # relaying: the clock bounds the reads
        self._whole: bytes | None = None

    async def head(self) -> bytes:
        """Read until the first token (or a finished answer without one); the events read are
        kept in ``head_events`` and returned as the bytes to send. Raises
        :class:`StreamBroken` when the stream fails first."""
        while True:
            batch = await self._read(grace=False)
            if batch is not None:
                self.head_events += batch
                if self._broken is not None:
                    raise self._broken
            if self.state.finished or any(kind is Kind.TOKEN for _, kind, _ in batch or ()):
                return b"".join(event.raw for event, _, _ in self.head_events)
            if batch is None or self._done:  # ended, or a bare [DONE]: no answer at all
                raise StreamBroken(OutcomeKind.NETWORK_ERROR, ENDED_BEFORE_FIRST_TOKEN)

    async def relay(self, transform: Transform = forward) -> AsyncIterator[bytes]:
        """The rest of the stream as client bytes, ending with ``[DONE]``; raises
        :class:`StreamBroken` when the upstream breaks before the answer finished."""
        self._committed = True
        while not self._done:
            batch = await self._read(grace=self.state.finished)
            if batch is None:
                if self.state.finished:  # ended without its end marker, or lingered after it
                    if self.state.end_event:
                        yield self.state.end_event
                    return
                raise StreamBroken(OutcomeKind.NETWORK_ERROR, "stream cut before the answer ended")
            if transform is forward and self._whole is not None:
                if self._whole:  # the common case: whole events, none dropped, as they came
                    yield self._whole
            else:
                out = [part for o in batch if (part := transform(*o)) is not None]
                if out:
                    yield out[0] if len(out) == 1 else b"".join(out)
            if self._broken is not None:  # after what came before it was relayed
                raise self._broken
        if self._late_error and self.state.end_event:  # in place of the error: the end marker
            yield self.state.end_event

    async def drain(self) -> None:
        """Read what follows ``[DONE]`` (the body's end) for a moment, so that the pooled
        connection is returned to its pool rather than closed."""
        if self._eof:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(DRAIN_SECONDS):
                async for _ in self._chunks:
                    pass

    async def _read(self, *, grace: bool) -> list[Observed] | None:
        """The next chunk's observed events (maybe none); ``None`` at the end of the stream.
        ``_whole`` is the chunk itself when it held whole events only and none was dropped."""
        self._whole = None
        if self._first:
            chunk, self._first = self._first, b""
        elif self._eof:
            return None
        else:
            read = await self._next_chunk(grace)
            if read is None:
                self._eof = True
                rest = self._splitter.rest()
                item = self._observe(rest) if rest is not None else None
                return [item] if item is not None else None
            chunk = read
        events = self._splitter.feed(chunk)
        observed: list[Observed] = []
        finished, answered = self.state.finished, False
        for event in events:
            item = self._observe(event)
            if item is not None:
                observed.append(item)
                answered = answered or item[1] in _ANSWERING
            if self._done or self._broken is not None:  # nothing after [DONE] or a failure
                break
        if answered or self.state.finished is not finished:
            self.clock.answered()
        if self._splitter.overflowed and not self._done and self._broken is None:
            self._broken = StreamBroken(OutcomeKind.HTTP_ERROR, EVENT_TOO_LARGE, _TOO_LARGE_BODY)
        if len(observed) == len(events) and self._splitter.empty and events:
            self._whole = b"".join(e.raw for e in events) if len(events) > 1 else events[0].raw
        return observed

    async def _next_chunk(self, grace: bool) -> bytes | None:
        try:
            if grace:
                async with asyncio.timeout(FINISH_GRACE_SECONDS):  # finished: only usage and
                    return await anext(self._chunks)  # [DONE] can follow
            if self._committed:
                return await self.clock.read(self._chunks)
            return await anext(self._chunks)
        except StopAsyncIteration:
            return None
        except TimeoutError:  # only the grace timer: the transport's own are httpx errors
            return None
        except IdleLimit:
            raise StreamBroken(OutcomeKind.TIMEOUT, STREAM_IDLE) from None
        except (httpx.TransportError, aiohttp.ClientError):
            if grace:  # the answer had finished: a reset instead of [DONE] ends it
                return None
            raise

    def _observe(self, event: SseEvent) -> Observed | None:
        try:
            kind, payload = self.state.observe(event)
        except Exception:  # a field of a type the observer did not foresee: malformed too
            kind, payload = Kind.MALFORMED, None
        if kind is Kind.MALFORMED:
            logger.warning("%s: dropped a malformed stream event: %.200r", self._label, event.raw)
            return None
        if kind is Kind.ERROR:
            if self.state.finished:  # the answer is whole: the error ends it and fails nothing
                logger.info("%s: error after the answer finished: %.200r", self._label, event.raw)
                self._done = self._late_error = True
                return None
            body = orjson.dumps(payload)
            self._broken = StreamBroken(OutcomeKind.HTTP_ERROR, "in-band stream error", body)
            return None
        if kind is Kind.DONE:
            self._done = True
        elif self._watchdog is not None and not self.state.finished:
            useful, protected = useful_bytes(event.name, payload)
            if self._watchdog.observe(useful, protected, time.monotonic()):
                # this event is relayed (its text is counted as sent), then the stream ends
                self._broken = StreamBroken(OutcomeKind.TIMEOUT, THROUGHPUT_TOO_LOW)
        return event, kind, payload
