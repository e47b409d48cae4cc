"""The /v1 proxy: thin async consumers over the attempt loop.

Each consumer authenticates against the in-process snapshot, resolves the model, runs the
attempt loop, and relays the winner. While the upstream is being asked or streamed, the relay
races the client's ``http.disconnect`` so that a client that leaves cancels the upstream request
at once (Channels dispatches one message at a time, so ``handle()`` would never see it).
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

from resilience.domain.attempt_policy import AttemptPolicy, deadline_ms
from resilience.services.housekeeping import resilience_ready
from resilience.state import get_store
from resilience.store import StateStore
from routing import attempts
from routing.attempts import AttemptContext, AttemptLoop, AttemptResult
from routing.domain.auth import authenticate, presented_key
from routing.domain.catalog import model_detail, model_list
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.endpoints import CHAT_COMPLETIONS, MESSAGES, Endpoint
from routing.domain.errors import GatewayError
from routing.domain.planning import Target, plan_route
from routing.domain.requests import ClientRequest
from routing.guards import default_filters, default_holders, default_recorders
from routing.guards.restatement import restate
from routing.preludes import Answer, prelude_for
from routing.recovery import StreamRelay
from routing.relay import (
    KEEP_ALIVE,
    WARNING_HEADER,
    Headers,
    failure_response,
    in_band_error,
    keep_alive_headers,
    reply_headers,
    with_warnings,
)
from routing.response_pins import pinned_plan, remember, response_id
from routing.snapshot import current_snapshot
from routing.strategies import order_targets
from routing.upstream import Forwarded, Upstream

logger = logging.getLogger(__name__)

JSON = b"application/json"
DEADLINE_HEADER = b"x-omniroute-deadline-ms"
ANTHROPIC_VERSION = b"anthropic-version"
NO_CHANNEL_LAYER = "omniroute-proxy-has-no-channel-layer"
_default_upstream = Upstream()


_loops: dict[tuple[int, int], tuple[Upstream, StateStore, AttemptLoop]] = {}


def attempt_loop(upstream: Upstream, store: StateStore) -> AttemptLoop:
    """The attempt loop with every resilience filter and recorder, built once per pair."""
    cached = _loops.get((id(upstream), id(store)))
    if cached is not None and cached[0] is upstream and cached[1] is store:
        return cached[2]
    loop = AttemptLoop(
        upstream, default_filters(store), default_recorders(store), restate,
        default_holders(store),
    )  # fmt: skip
    _loops[(id(upstream), id(store))] = (upstream, store, loop)
    return loop


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

    async def send_headers(self, *, status: int = 200, headers: Any = None) -> None:
        self.started = True
        await super().send_headers(status=status, headers=headers)

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


class RelayConsumer(ProxyConsumer):
    """One client API, as its :class:`Endpoint` declares it: parse, plan on the targets that
    speak its wire format, run the attempt loop, relay the answer (streaming or not)."""

    def __init__(self, *args: Any, endpoint: Endpoint | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if endpoint is not None:
            self.endpoint = endpoint

    async def serve(self, body: bytes) -> None:
        snapshot, key = await self.authenticated()  # before parsing: strangers cost no parse
        request = self.endpoint.parse(body)
        plan = plan_route(snapshot, request.model, key, self.endpoint.wire_format, request.needs)
        await resilience_ready(self.store)
        if request.previous_response_id is not None:
            plan = await pinned_plan(self.store, plan, request.previous_response_id)
        context = AttemptContext(
            self.request_id, key, plan, request.stream, snapshot,
            endpoint=self.endpoint, forwarded=self._forwarded(), tools=request.tools,
        )  # fmt: skip
        context.deadline_at = attempts.now() + self._deadline_ms(context.policy) / 1000
        await order_targets(context, self.store)
        try:
            await self.race_disconnect(self._dispatch(context, request))
        finally:
            for finish in context.on_finish:
                finish()

    def _deadline_ms(self, policy: AttemptPolicy) -> int:
        header = next((v for k, v in self.scope["headers"] if k == DEADLINE_HEADER), None)
        try:
            return deadline_ms(policy, header)
        except ValueError as error:
            raise GatewayError(400, "invalid_deadline", str(error)) from error

    def _forwarded(self) -> Forwarded:
        passed = self.endpoint.passed_headers
        if not passed:
            return ()
        values: dict[str, list[str]] = {}
        for name, value in self.scope["headers"]:
            if name in passed:  # a repeated header is one comma-separated list (RFC 9110)
                values.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))
        return tuple((name, ", ".join(given)) for name, given in values.items())

    async def _dispatch(self, context: AttemptContext, request: ClientRequest) -> None:
        """The ordinary dispatch, after the prelude of a fusion or pipeline combo (which asks
        its panel or its earlier stages, then hands back what to dispatch, or an answer)."""
        prelude = prelude_for(context.plan.strategy)
        if prelude is not None:
            step = await prelude(
                attempt_loop(self.upstream, self.store), self.store, context, request
            )
            if isinstance(step, Answer):
                await self._answer(step)
                return
            context, request = step.context, step.request
        await self._attempt_and_relay(context, request)

    async def _answer(self, answer: Answer) -> None:
        if answer.error:
            await self.send_error_body(answer.status, answer.body, answer.headers)
        else:
            headers = answer.headers + self.base_headers()
            await self.send_response(answer.status, answer.body, headers=headers)

    async def _attempt_and_relay(self, context: AttemptContext, request: ClientRequest) -> None:
        loop = attempt_loop(self.upstream, self.store)
        if context.stream:
            context.before_wait = self._keep_alive
        result = await loop.run(context, request.payload)
        if result.reply is None:
            status, body, headers = failure_response(context)
            if self.started:  # a keep-alive began the stream: the failure goes in-band
                await self._end_stream_with_error(status, body, headers)
            else:
                await self.send_error_body(status, body, headers)
            return
        try:
            await self._relay(loop, context, request, result)
        finally:
            await result.reply.aclose()

    async def _relay(
        self,
        loop: AttemptLoop,
        context: AttemptContext,
        request: ClientRequest,
        result: AttemptResult,
    ) -> None:
        reply, target = result.reply, result.target
        assert reply is not None and target is not None
        if reply.stream is None and request.warnings:
            reply.body = with_warnings(reply.body, request.warnings)
        headers = reply_headers(context, target, reply) + self.base_headers()
        headers += [(WARNING_HEADER, text.encode()) for text in request.warnings]
        if reply.stream is None:
            await self.send_headers(status=reply.status, headers=headers)
            await self.send_body(reply.body)
            if self.endpoint.pins_responses:
                await self._pin(response_id(reply.body), target)
            return
        client = (self._send_part, self._end)
        relay = StreamRelay(loop, context, request.payload, client, target, reply)
        try:
            if not self.started:  # else a keep-alive sent the head before a wait
                await self.send_headers(status=reply.status, headers=headers)
            await self.send_body(reply.body, more_body=True)
            await relay.run()
        finally:
            await relay.settle()
        if self.endpoint.pins_responses and reply.stream.state.envelope:
            await self._pin(reply.stream.state.envelope.get("id"), target)

    async def _keep_alive(self) -> None:
        """Before a cooldown-aware wait, a streaming client gets the answer's head and an SSE
        comment at once, so that a long wait does not trip its first-byte timeout (reference-part2
        §4.7); the head goes out once, the comment before every wait."""
        if not self.started:
            await self.send_headers(status=200, headers=keep_alive_headers() + self.base_headers())
        await self.send_body(KEEP_ALIVE, more_body=True)

    async def _end_stream_with_error(self, status: int, body: bytes, headers: Headers) -> None:
        """The failure answer of a request whose stream a keep-alive began: this API's in-band
        error event and its end marker (a status line cannot follow a sent head)."""
        message, code = in_band_error(status, body, headers)
        state = self.endpoint.stream_state()
        await self.send_body(state.error_event(message, code) + state.end_event)

    async def _pin(self, answer_id: str | None, target: Target) -> None:
        if answer_id:
            await remember(self.store, answer_id, target.connection.id)

    async def _send_part(self, part: bytes) -> None:
        await self.send_body(part, more_body=True)

    async def _end(self) -> None:
        await self.send_body(b"")


class ChatCompletionsConsumer(RelayConsumer):
    """``POST /v1/chat/completions``, streaming and not (the relay consumer's default)."""


class ModelsConsumer(ProxyConsumer):
    """``GET /v1/models`` and ``GET /v1/models/{id}``: the combos and declared models the key
    may use, in Anthropic's shape when the client sends ``anthropic-version``."""

    allowed_methods = ("GET",)

    def error_shape(self) -> Endpoint:
        anthropic = any(name == ANTHROPIC_VERSION for name, _ in self.scope["headers"])
        return MESSAGES if anthropic else self.endpoint

    async def serve(self, body: bytes) -> None:
        anthropic = self.endpoint is MESSAGES
        snapshot, key = await self.authenticated()
        name = self.scope.get("url_route", {}).get("kwargs", {}).get("model")
        created = int(time.time())
        if name is None:
            payload = model_list(snapshot, key, created=created, anthropic=anthropic)
        else:
            payload = model_detail(snapshot, key, name, created=created, anthropic=anthropic)
        headers = [(b"content-type", JSON), *self.base_headers()]
        await self.send_response(200, payload, headers=headers)


class NotFoundConsumer(ProxyConsumer):
    """Any other ``/v1/...`` path: a JSON 404 (not Django's page listing every route)."""

    allowed_methods = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")

    async def serve(self, body: bytes) -> None:
        path = self.scope["path"]
        raise GatewayError(404, "not_found", f"There is no endpoint at {path}.")
