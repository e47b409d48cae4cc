"""The /v1 proxy's common consumer shell: method check, body limit, authentication, error
answers in the client API's shape, the request id, and the race against the client's
``http.disconnect`` (Channels dispatches one message at a time, so ``handle()`` would never
see it: a watcher cancels the work when the client leaves).

The race may also end the work when the process starts to stop (``omniroute.core.stopping``): a
stream is ended then, in :meth:`ProxyConsumer.end_at_shutdown`, while a plain answer is left
to finish. A request that arrives once the stop has begun is refused with a 503
``server_shutting_down``.
"""

from __future__ import annotations

import asyncio
import logging
from enum import Enum
from functools import partial
from typing import Any

from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings
from django.utils import timezone

from omniroute.core import stopping
from omniroute.core.events import during_request
from omniroute.core.observability.requestlog.writer import request_log_writer
from omniroute.core.observability.tracing import RequestTrace, start_request
from omniroute.core.state import get_store
from omniroute.core.store import StateStore
from routing.domain.attempts.outcomes import Outcome
from routing.domain.client.endpoints import CHAT_COMPLETIONS, Endpoint
from routing.domain.client.errors import GatewayError
from routing.domain.client.usage import NO_TOKENS, Tokens
from routing.domain.config.auth import authenticate, presented_key
from routing.domain.config.snapshot import ConfigSnapshot, KeyInfo
from routing.proxy import clock
from routing.proxy.context import AttemptContext
from routing.proxy.request_ids import new_request_id
from routing.proxy.request_log import error_code, request_record
from routing.proxy.telemetry import AccessRecord, RequestMetrics, failure_detail, record_request
from routing.proxy.upstream.client import Upstream
from routing.snapshot import current_snapshot

logger = logging.getLogger(__name__)

JSON = b"application/json"
NO_CHANNEL_LAYER = "omniroute-proxy-has-no-channel-layer"
# How long a request's work runs before a task starts watching for its client leaving: most
# plain requests end sooner and pay for no watcher (docs/architecture.md, "One request").
WATCH_AFTER_SECONDS = 0.05
_default_upstream = Upstream()


class Ended(Enum):
    """Why :meth:`ProxyConsumer.race_disconnect` cancelled its work."""

    CLIENT_LEFT = "client_left"
    SHUTDOWN = "shutdown"


async def close_upstream_pools() -> None:
    """Close the connection pools the consumers opened on this event loop (the gateway's stop
    calls it once the last request is over)."""
    await _default_upstream.aclose()


class ProxyConsumer(AsyncHttpConsumer):  # channels ships no types: AsyncHttpConsumer is Any
    """Common shell: method check, body limit, auth, errors, request id."""

    allowed_methods: tuple[str, ...] = ("POST",)
    endpoint: Endpoint = CHAT_COMPLETIONS  # whose error shape this consumer answers in
    # The proxy needs no channel layer (its own ``__call__`` never asks for one).
    channel_layer_alias = NO_CHANNEL_LAYER

    # What a request starts with, until it sets its own: read from the class, so a consumer
    # (one per request) is built with four attributes rather than twenty. Immutable values only
    # (tests/routing/test_consumer_defaults.py).
    status = 0  # the answer's status once its head went out
    sent_bytes = 0
    key_prefix = "-"  # set once the key is accepted
    key: KeyInfo | None = None  # the accepted key, for the request log
    error_code = ""  # the gateway's code in the error answer, if it gave one
    # When a stream's first token went out (clock time): the one measurement both the
    # time-to-first-token histogram and the request log report (docs/operating.md).
    first_token_at: float | None = None
    tokens: Tokens = NO_TOKENS  # as the answer's usage reported them: metrics, log
    body_size = 0
    rejected = False
    started = False  # whether the response has begun (no error body after that)
    body_ended = False  # whether the response's last body part went out
    _working = False  # race_disconnect's work is running
    _watcher: asyncio.Task[None] | None = None  # watching for the client leaving
    _ended: Ended | None = None  # why it was cancelled, if it was
    recorded = False  # counted and logged (once, however the request ended)
    trace: RequestTrace | None = None  # the request's span, when traced

    def __init__(
        self,
        *args: Any,
        upstream: Upstream | None = None,
        store: StateStore | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.upstream = upstream or _default_upstream
        self.store = store or get_store()
        self.request_id = new_request_id()
        self.arrived = clock.now()  # the proxy's clock, which the request's deadline runs on

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Each message the server hands in, dispatched in turn until the consumer stops.

        Channels' own loop (``await_many_dispatch``) runs every receive in a task of its own
        and waits on it with ``asyncio.wait``, to merge the client's messages with a channel
        layer's; the proxy has no channel layer, so it awaits the one receive directly and
        saves a task and a wait per message (docs/architecture.md, "One request")."""
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        self._receive = receive  # kept so the relay can watch for http.disconnect
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The hot path never touches the database, so skip Channels' per-message
        # close_old_connections thread hop; snapshot rebuilds use
        # omniroute.core.db.db_sync_to_async.
        handler = getattr(self, message["type"].replace(".", "_"), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def http_request(self, message: dict[str, Any]) -> None:
        if not self.rejected:
            self.body_size += len(message.get("body", b""))
            if self.body_size > settings.MAX_BODY_BYTES:
                self.rejected = True
                self.body: list[bytes] = []
                await self.send_error(_too_large())
        if self.rejected:
            if not message.get("more_body"):
                self.finished()
                raise StopConsumer()
            return
        await super().http_request(message)

    async def handle(self, body: bytes) -> None:
        try:
            self.endpoint = self.error_shape()
            name = f"{self.scope['method']} {self.endpoint_label()}"
            self.trace = start_request(name, self.scope["headers"])
            during_request(self.request_id)  # the resilience events it causes name it
            self._check_method()
            if stopping.shutting_down.is_set():
                raise _shutting_down()
            await self.serve(body)
        except GatewayError as error:
            await self.send_error(error)
        except Exception:  # never daphne's HTML 500: a JSON error while nothing was sent yet
            logger.exception("request %s failed", self.request_id)
            if not self.started:
                await self.send_error(_internal_error())
            elif not self.body_ended:  # a stream under way: ended in its own shape, never left open
                await self._end_stream_failed()
        finally:
            self.finished()

    async def send_headers(self, *, status: int = 200, headers: Any = None) -> None:
        self.started, self.status = True, status
        await super().send_headers(status=status, headers=headers)

    async def send_body(self, body: bytes, *, more_body: bool = False) -> None:
        self.sent_bytes += len(body)
        self.body_ended = not more_body
        await super().send_body(body, more_body=more_body)
        if not more_body:
            # The server writes the answer's last part on its loop's next turn (daphne's
            # Twisted transport buffers every write): give it that turn before the request's
            # own bookkeeping (releasing admission, recording), so the client is not kept
            # waiting for work that is no longer its own (docs/architecture.md, "One request").
            await asyncio.sleep(0)

    async def _end_stream_failed(self) -> None:
        """The gateway's own failure after a stream's head went out: this API's in-band
        ``internal_error`` event, as any failure then (with the end marker only before the
        first token), so the client is told and not left waiting (docs/resilience.md,
        "Streams")."""
        error = _internal_error()
        self.error_code = error.code
        state = self.endpoint.stream_state()
        ending = state.error_event(error.message, error.code)
        if self.first_token_at is None:  # only keep-alive comments went out
            ending += state.end_event
        try:
            await self.send_body(ending)
        except Exception:  # the client may be gone too: nothing is left to tell
            logger.debug("request %s: its stream could not be ended", self.request_id)

    async def http_disconnect(self, message: dict[str, Any]) -> None:
        # A client that left before its body arrived was a request too (499).
        self.finished()
        await super().http_disconnect(message)

    def finished(self) -> None:
        """The request is over: count it and write its access-log line (no I/O of its own),
        once."""
        if self.recorded:
            return
        self.recorded = True
        try:
            outcomes = self.outcomes()
            record = self._access_record(outcomes)
            metrics = self.request_metrics()
            record_request(record, metrics)
            if self.trace is not None:
                self.end_trace(self.trace, record, metrics)
            self._log_request(record)
        except Exception:  # telemetry never fails a request
            logger.exception("recording request %s failed", self.request_id)

    def _log_request(self, access: AccessRecord) -> None:
        """Push the request to the request log (a put on its queue; nothing when it is off)."""
        writer = request_log_writer()
        if writer is not None:
            record = request_record(
                access,
                key=self.key,
                context=self.context,
                error_code=self.error_code,
                first_token_ms=_ms(self.time_to_first_token()),
                tokens=self.tokens,
            )
            writer.submit(record)

    @property
    def context(self) -> AttemptContext | None:
        """The request's context once the pipeline opened it (a relay consumer's)."""
        return None

    def _access_record(self, outcomes: list[Outcome]) -> AccessRecord:
        return AccessRecord(
            request_id=self.request_id,
            method=self.scope["method"],
            endpoint=self.endpoint_label(),
            key=self.key_prefix,
            model=self.model_label(),
            target=self.target_label(),
            status=self.status or 499,
            attempts=len(outcomes),
            latency_ms=self._elapsed_ms(),
            bytes=self.sent_bytes,
            targets=self.targets_tried(),
            error=failure_detail(outcomes),
        )

    def _elapsed_ms(self) -> int:
        return int((clock.now() - self.arrived) * 1000)

    def first_token_sent(self) -> None:
        """A stream's first token just went out to the client: commit (docs/operating.md,
        "Request log"). A head or a keep-alive comment sent while waiting is not a token."""
        if self.first_token_at is None:
            self.first_token_at = clock.now()

    def time_to_first_token(self) -> float | None:
        """Seconds from the request's arrival to its first token (``None``: no stream, or
        none sent)."""
        return None if self.first_token_at is None else self.first_token_at - self.arrived

    def endpoint_label(self) -> str:
        """The metrics' and access log's name for this route (the path by default)."""
        return str(self.scope["path"])

    def model_label(self) -> str:
        return "-"

    def target_label(self) -> str:
        return "-"

    def outcomes(self) -> list[Outcome]:
        """The upstream attempts this request made, in order."""
        return []

    def targets_tried(self) -> int:
        """How many distinct targets those attempts went to."""
        return 0

    def request_metrics(self) -> RequestMetrics:
        """The request's metric labels and what each target did (none by default)."""
        return RequestMetrics()

    def end_trace(self, trace: RequestTrace, record: AccessRecord, metrics: RequestMetrics) -> None:
        """End the request's span (after its attempts' spans, when it made any)."""
        trace.end(
            {
                "http.request.method": record.method,
                "http.route": record.endpoint,
                "http.response.status_code": record.status,
                "omniroute.request_id": record.request_id,
                "omniroute.model": record.model,
                "omniroute.target": record.target,
                "omniroute.provider": metrics.provider,
                "omniroute.attempts": record.attempts,
            },
            error=record.status >= 500,
        )

    async def serve(self, body: bytes) -> None:
        raise NotImplementedError

    def error_shape(self) -> Endpoint:
        """The client API whose error shape every answer of this request takes."""
        return self.endpoint

    def _check_method(self) -> None:
        if self.scope["method"] not in self.allowed_methods:
            allowed = ", ".join(self.allowed_methods)
            raise GatewayError(
                405,
                "method_not_allowed",
                f"Method {self.scope['method']} is not allowed here; use {allowed}.",
                headers={"allow": allowed},
            )

    async def authenticated(self) -> tuple[ConfigSnapshot, KeyInfo]:
        snapshot = await current_snapshot()
        key = authenticate(snapshot, presented_key(self.scope["headers"]), timezone.now())
        self.key_prefix, self.key = key.prefix, key
        return snapshot, key

    async def send_error(self, error: GatewayError) -> None:
        headers = [(b"content-type", JSON)]
        headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
        await self.send_error_body(error.status, error.body(), headers)

    async def send_error_body(
        self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        """An error answer, in the client API's own error shape."""
        self.error_code = error_code(body)
        body = self.endpoint.render_error(status, body)
        await self.send_response(status, body, headers=headers + self.base_headers())

    def base_headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"x-omniroute-request-id", self.request_id.encode())]

    async def race_disconnect(self, work: Any, *, ends_at_shutdown: bool = False) -> None:
        """Run ``work`` until done or until the client disconnects (then cancel it); with
        ``ends_at_shutdown`` (a stream), also until the process starts to stop (then cancel it
        and :meth:`end_at_shutdown`).

        ``work`` runs in this task. Once it has run for ``WATCH_AFTER_SECONDS``, a watcher task
        cancels this task when ``http.disconnect`` arrives while ``work`` is still running, and
        that one cancellation is absorbed here. (A timer, and a task only for work that lasts:
        this runs on every proxied request; a client that leaves sooner is noticed then.)
        """
        current = asyncio.current_task()
        assert current is not None
        self._working = True
        timer = asyncio.get_running_loop().call_later(WATCH_AFTER_SECONDS, self._watch, current)
        unwatch = (
            stopping.shutting_down.watch(partial(self._end_work, current, Ended.SHUTDOWN))
            if ends_at_shutdown
            else None
        )
        try:
            await work
        except asyncio.CancelledError:
            if self._ended is None:
                raise  # cancelled from outside (the server's last cut): not ours to absorb
            current.uncancel()
        finally:
            self._working = False
            timer.cancel()
            if self._watcher is not None:
                self._watcher.cancel()
            if unwatch is not None:
                unwatch()
        if self._ended is Ended.SHUTDOWN:
            await self.end_at_shutdown()

    async def end_at_shutdown(self) -> None:
        """End a request whose work the stop cancelled: a 503 while nothing was sent."""
        if not self.started:
            await self.send_error(_shutting_down())

    def _watch(self, task: asyncio.Task[Any]) -> None:
        self._watcher = asyncio.ensure_future(self._cancel_on_disconnect(task))

    async def _cancel_on_disconnect(self, task: asyncio.Task[Any]) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                break
        self._end_work(task, Ended.CLIENT_LEFT)

    def _end_work(self, task: asyncio.Task[Any], why: Ended) -> None:
        """Cancel the racing work, once, if it still runs."""
        if self._working and self._ended is None:
            self._ended = why
            task.cancel()


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _internal_error() -> GatewayError:
    return GatewayError(
        500,
        "internal_error",
        "The gateway failed to handle this request.",
        error_type="server_error",
    )


def _shutting_down() -> GatewayError:
    return GatewayError(
        503,
        stopping.SHUTTING_DOWN,
        "The gateway is shutting down; send the request again.",
        error_type="server_error",
    )


def _too_large() -> GatewayError:
    limit = settings.MAX_BODY_BYTES
    return GatewayError(
        413, "request_too_large", f"The request body exceeds the limit of {limit} bytes."
    )
