"""The /v1 proxy's common consumer shell: method check, body limit, authentication, error
answers in the client API's shape, the request id, and the race against the client's
``http.disconnect`` (Channels dispatches one message at a time, so ``handle()`` would never
see it: a watcher cancels the work when the client leaves).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings
from django.utils import timezone

from resilience.state import get_store
from resilience.store import StateStore
from routing.domain.auth import authenticate, presented_key
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.endpoints import CHAT_COMPLETIONS, Endpoint
from routing.domain.errors import GatewayError
from routing.domain.outcomes import Outcome
from routing.snapshot import current_snapshot
from routing.telemetry import AccessRecord, failure_detail, record_request
from routing.upstream import Upstream

logger = logging.getLogger(__name__)

JSON = b"application/json"
NO_CHANNEL_LAYER = "omniroute-proxy-has-no-channel-layer"
_default_upstream = Upstream()


async def close_upstream_pools() -> None:
    """Close the connection pools the consumers opened on this event loop (the gateway's stop
    calls it once the last request is over)."""
    await _default_upstream.aclose()


class ProxyConsumer(AsyncHttpConsumer):  # channels ships no types: AsyncHttpConsumer is Any
    """Common shell: method check, body limit, auth, errors, request id."""

    allowed_methods: tuple[str, ...] = ("POST",)
    endpoint: Endpoint = CHAT_COMPLETIONS  # whose error shape this consumer answers in
    # The proxy needs no channel layer; skipping it saves a channel per request.
    channel_layer_alias = NO_CHANNEL_LAYER

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
        self.request_id = secrets.token_hex(12)
        self.arrived = time.monotonic()
        self.status = 0  # the answer's status once its head went out
        self.sent_bytes = 0
        self.key_prefix = "-"  # set once the key is accepted
        self.body_size = 0
        self.rejected = False
        self.started = False  # whether the response has begun (no error body after that)
        self._working = False  # race_disconnect's work is running
        self._client_left = False  # the client disconnected while it was

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self._receive = receive  # kept so the relay can watch for http.disconnect
        await super().__call__(scope, receive, send)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The hot path never touches the database, so skip Channels' per-message
        # close_old_connections thread hop; snapshot rebuilds use resilience.db.db_sync_to_async.
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
            self._check_method()
            await self.serve(body)
        except GatewayError as error:
            await self.send_error(error)
        except Exception:  # never daphne's HTML 500: a JSON error while nothing was sent yet
            logger.exception("request %s failed", self.request_id)
            if not self.started:
                await self.send_error(_internal_error())
        finally:
            self.finished()

    async def send_headers(self, *, status: int = 200, headers: Any = None) -> None:
        self.started, self.status = True, status
        await super().send_headers(status=status, headers=headers)

    async def send_body(self, body: bytes, *, more_body: bool = False) -> None:
        self.sent_bytes += len(body)
        await super().send_body(body, more_body=more_body)

    def finished(self) -> None:
        """The request is over: count it and write its access-log line (no I/O of its own)."""
        try:
            outcomes = self.outcomes()
            record_request(self._access_record(outcomes), outcomes)
        except Exception:  # telemetry never fails a request
            logger.exception("recording request %s failed", self.request_id)

    def _access_record(self, outcomes: list[Outcome]) -> AccessRecord:
        return AccessRecord(
            request_id=self.request_id, method=self.scope["method"],
            endpoint=self.endpoint_label(), key=self.key_prefix, model=self.model_label(),
            target=self.target_label(), status=self.status or 499,
            attempts=len(outcomes), latency_ms=self._elapsed_ms(),
            bytes=self.sent_bytes, error=failure_detail(outcomes),
        )  # fmt: skip

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self.arrived) * 1000)

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
        self.key_prefix = key.prefix
        return snapshot, key

    async def send_error(self, error: GatewayError) -> None:
        headers = [(b"content-type", JSON)]
        headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
        await self.send_error_body(error.status, error.body(), headers)

    async def send_error_body(
        self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> None:
        """An error answer, in the client API's own error shape."""
        body = self.endpoint.render_error(status, body)
        await self.send_response(status, body, headers=headers + self.base_headers())

    def base_headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"x-omniroute-request-id", self.request_id.encode())]

    async def race_disconnect(self, work: Any) -> None:
        """Run ``work`` until done or until the client disconnects (then cancel it).

        ``work`` runs in this task; a watcher task cancels this task when ``http.disconnect``
        arrives while ``work`` is still running, and that one cancellation is absorbed here.
        (One task and no ``asyncio.wait`` per request: this runs on every proxied request.)
        """
        current = asyncio.current_task()
        assert current is not None
        self._working = True
        watcher = asyncio.ensure_future(self._cancel_on_disconnect(current))
        try:
            await work
        except asyncio.CancelledError:
            if not self._client_left:
                raise  # cancelled from outside (server shutdown): not ours to absorb
            current.uncancel()
        finally:
            self._working = False
            watcher.cancel()

    async def _cancel_on_disconnect(self, task: asyncio.Task[Any]) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                break
        if self._working:
            self._client_left = True
            task.cancel()


def _internal_error() -> GatewayError:
    return GatewayError(
        500, "internal_error", "The gateway failed to handle this request.",
        error_type="server_error",
    )  # fmt: skip


def _too_large() -> GatewayError:
    limit = settings.MAX_BODY_BYTES
    return GatewayError(
        413, "request_too_large", f"The request body exceeds the limit of {limit} bytes."
    )
