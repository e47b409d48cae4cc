"""The /v1 proxy: thin async consumers over the attempt loop.

Each relay consumer runs the declared pipeline (``routing.proxy.pipeline``: authenticate,
resolve the model, order a combo's targets, keep a client session together...), then the
attempt loop (or a fusion or pipeline prelude), and relays the winner. While the upstream is
being asked or streamed, the relay races the client's ``http.disconnect``
(``routing.proxy.shell``) so that a client that leaves cancels the upstream request at once;
a stream also races the process's stop, and ends with the in-band ``server_shutting_down``
error when it begins (docs/deploying.md).
"""

from __future__ import annotations

import math
import time
from typing import Any

from omniroute.core.bounds import clip
from omniroute.core.observability.tracing import RequestTrace
from omniroute.core.stopping import SHUTTING_DOWN
from omniroute.core.store import StateStore
from routing.domain.attempts.outcomes import Outcome
from routing.domain.client.catalog import model_detail, model_list
from routing.domain.client.endpoints import MESSAGES, Endpoint
from routing.domain.client.errors import GatewayError
from routing.domain.client.requests import ClientRequest
from routing.domain.client.usage import answer_tokens
from routing.domain.plan.planning import Target
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext
from routing.proxy.guards import default_filters, default_holders, default_recorders
from routing.proxy.guards.restatement import restate
from routing.proxy.hedging import Hedging
from routing.proxy.pipeline import Exchange, run_pipeline
from routing.proxy.preludes import Answer, prelude_for
from routing.proxy.recovery import SHUTDOWN_MESSAGE, StreamRelay
from routing.proxy.relay import (
    KEEP_ALIVE,
    WARNING_HEADER,
    Headers,
    decision_comment,
    failure_response,
    in_band_error,
    keep_alive_headers,
    reply_headers,
    with_warnings,
)
from routing.proxy.response_pins import answer_id, remember
from routing.proxy.seams import AttemptResult
from routing.proxy.shell import JSON, ProxyConsumer
from routing.proxy.telemetry import (
    LOCKED_REASONS,
    AccessRecord,
    RequestMetrics,
    request_metrics,
    target_label,
    targets_tried,
)
from routing.proxy.traces import attempt_spans
from routing.proxy.upstream.client import Upstream

ANTHROPIC_VERSION = b"anthropic-version"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"


_loops: dict[tuple[int, int], tuple[Upstream, StateStore, AttemptLoop]] = {}


def attempt_loop(upstream: Upstream, store: StateStore) -> AttemptLoop:
    """The attempt loop with every resilience filter and recorder, built once per pair."""
    cached = _loops.get((id(upstream), id(store)))
    if cached is not None and cached[0] is upstream and cached[1] is store:
        return cached[2]
    loop = AttemptLoop(
        upstream,
        default_filters(store),
        default_recorders(store),
        restate,
        default_holders(store),
        Hedging(store),
        store,
    )
    _loops[(id(upstream), id(store))] = (upstream, store, loop)
    return loop


class RelayConsumer(ProxyConsumer):
    """One client API, as its :class:`Endpoint` declares it: parse, plan on the targets that
    speak its wire format, run the attempt loop, relay the answer (streaming or not)."""

    # Until the request sets them (read from the class, as ProxyConsumer's starting values).
    exchange: Exchange | None = None  # the access log reads its request and attempts
    stream_relay: StreamRelay | None = None  # the committed stream being relayed

    def __init__(self, *args: Any, endpoint: Endpoint | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if endpoint is not None:
            self.endpoint = endpoint

    def finished(self) -> None:
        super().finished()
        # What the request built holds this consumer's methods (the exchange its authentication,
        # the context a stream's keep-alive, the relay its sends): let go of it once recorded, so
        # the request leaves no reference cycle for the collector.
        self.exchange, self.stream_relay = None, None

    @property
    def context(self) -> AttemptContext | None:
        return None if self.exchange is None else self.exchange.context

    def _client_deadline_at(self) -> float:
        return math.inf if self.exchange is None else self.exchange.client_deadline_at

    def model_label(self) -> str:
        request = None if self.exchange is None else self.exchange.request
        return "-" if request is None else clip(request.model)

    def target_label(self) -> str:
        if self.context is None:
            return "-"
        return clip(target_label(self.context.loop.attempts))

    def outcomes(self) -> list[Outcome]:
        return (
            [] if self.context is None else [outcome for _, outcome in self.context.loop.attempts]
        )

    def targets_tried(self) -> int:
        return 0 if self.context is None else targets_tried(self.context.loop.attempts)

    def end_trace(self, trace: RequestTrace, record: AccessRecord, metrics: RequestMetrics) -> None:
        context = self.context
        if context is not None:
            attempt_spans(trace, context, metrics, time.time_ns())
        super().end_trace(trace, record, metrics)

    def request_metrics(self) -> RequestMetrics:
        exchange, context = self.exchange, self.context
        if exchange is None or context is None:
            return RequestMetrics()
        request = exchange.request
        loop = context.loop
        return request_metrics(
            context.facts.snapshot,
            None if request is None else request.model,
            loop.attempts,
            hedge=loop.hedge,
            locked=(e.target for e in loop.exclusions if e.reason in LOCKED_REASONS),
            first_token_seconds=self.time_to_first_token(),
            tokens=(self.tokens[0] or 0, self.tokens[1] or 0),
        )

    async def serve(self, body: bytes) -> None:
        """The declared pipeline (``routing.proxy.pipeline``), then the dispatch and relay of
        the answer; the finishers the steps added run when the dispatch ends, however it
        ended."""
        exchange = Exchange(
            self.request_id,
            self.endpoint,
            self.scope["headers"],
            body,
            self.store,
            self.upstream,
            self.authenticated,
        )
        self.exchange = exchange
        if self.trace is not None:
            exchange.traceparent = self.trace.traceparent()
        context = await run_pipeline(exchange)
        if self.trace is not None:
            context.attempt_times = []
        assert exchange.request is not None
        try:
            await self.race_disconnect(
                self._dispatch(context, exchange.request), ends_at_shutdown=context.facts.stream
            )
        finally:
            for finish in context.on_finish:
                done = finish()
                if done is not None:
                    await done

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
            assert self.exchange is not None
            self.exchange.context = context
        await self._attempt_and_relay(context, request)

    async def _answer(self, answer: Answer) -> None:
        self.tokens = answer.tokens  # metrics and the request log
        if answer.error:
            await self.send_error_body(answer.status, answer.body, answer.headers)
        else:
            headers = answer.headers + self.base_headers()
            await self.send_response(answer.status, answer.body, headers=headers)

    async def _attempt_and_relay(self, context: AttemptContext, request: ClientRequest) -> None:
        loop = attempt_loop(self.upstream, self.store)
        if context.facts.stream:
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
            self.tokens = answer_tokens(reply.answer)  # metrics and the request log
            if self.endpoint.pins_responses:
                await self._pin(answer_id(reply.answer), target)
            return
        client = (self._send_part, self._end)
        relay = StreamRelay(
            loop, context, request.payload, client, target, reply, self._client_deadline_at()
        )
        self.stream_relay = relay
        try:
            if not self.started:
                await self.send_headers(status=reply.status, headers=headers)
            else:  # a keep-alive sent the head before a wait: the decision leads the body
                await self.send_body(decision_comment(context, target), more_body=True)
            await self.send_body(reply.body, more_body=True)
            self.first_token_sent()  # the held-back head holds the first token
            await relay.run()
        finally:
            self.tokens = relay.tokens  # metrics and the request log, however the stream ended
            await relay.settle()
        if self.endpoint.pins_responses and reply.stream.state.envelope:
            await self._pin(reply.stream.state.envelope.get("id"), target)

    async def _keep_alive(self) -> None:
        """Before a cooldown-aware wait, a streaming client gets the answer's head and an SSE
        comment at once, so that a long wait does not trip its first-byte timeout;
        the head goes out once, the comment before every wait."""
        if not self.started:
            await self.send_headers(status=200, headers=keep_alive_headers() + self.base_headers())
        await self.send_body(KEEP_ALIVE, more_body=True)

    async def end_at_shutdown(self) -> None:
        """A stream the stop ended: a 503 before its head went out, else this API's in-band
        ``server_shutting_down`` error; after a keep-alive with the stream's end marker, as
        any failure then, after commit without, as any failure of the relay."""
        if not self.started:
            await super().end_at_shutdown()
            return
        self.error_code = SHUTTING_DOWN
        if self.stream_relay is not None:
            await self.send_body(self.stream_relay.shutdown_error())
            return
        state = self.endpoint.stream_state()
        await self.send_body(state.error_event(SHUTDOWN_MESSAGE, SHUTTING_DOWN) + state.end_event)

    async def _end_stream_with_error(self, status: int, body: bytes, headers: Headers) -> None:
        """The failure answer of a request whose stream a keep-alive began: this API's in-band
        error event and its end marker (a status line cannot follow a sent head)."""
        message, code = in_band_error(status, body, headers)
        self.error_code = code
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

    def endpoint_label(self) -> str:
        named = "model" in self.scope.get("url_route", {}).get("kwargs", {})
        return "/v1/models/{model}" if named else "/v1/models"

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

    def endpoint_label(self) -> str:
        return "unmatched"  # one label for every unknown path: clients cannot add series

    async def serve(self, body: bytes) -> None:
        path = clip(self.scope["path"])
        raise GatewayError(404, "not_found", f"There is no endpoint at {path}.")


class MessagesNotFoundConsumer(NotFoundConsumer):
    """Any ``/v1/messages/...`` path: a 404 in Anthropic's shape, which the Anthropic SDK reads
    (it asks ``/v1/messages/count_tokens``; the gateway does not count tokens)."""

    endpoint = MESSAGES

    async def serve(self, body: bytes) -> None:
        if self.scope["path"].rstrip("/") == COUNT_TOKENS_PATH:
            raise GatewayError(
                404,
                "not_found",
                "Token counting (/v1/messages/count_tokens) is not served by this gateway.",
            )
        await super().serve(body)
