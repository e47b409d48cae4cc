"""The /v1 proxy: thin async consumers over the attempt loop.

Each consumer authenticates against the in-process snapshot, resolves the model, orders a
combo's targets by its strategy, puts a client session's connection first
(``routing.affinity``), runs the attempt loop (or a fusion or pipeline prelude), and relays the
winner. While the upstream is being asked or streamed, the relay races the client's
``http.disconnect`` (``routing.proxy``) so that a client that leaves cancels the upstream
request at once.
"""

from __future__ import annotations

import math
import time
from typing import Any

from django.utils import timezone

from resilience.domain.attempt_policy import client_deadline_ms, deadline_ms
from resilience.services.housekeeping import resilience_ready
from resilience.store import StateStore
from routing import attempts, context_relay
from routing.affinity import keep_session_together
from routing.attempts import AttemptContext, AttemptLoop, AttemptResult
from routing.domain.catalog import model_detail, model_list
from routing.domain.endpoints import MESSAGES, Endpoint
from routing.domain.errors import GatewayError
from routing.domain.lease_routing import check_route, lease_claim
from routing.domain.outcomes import Outcome
from routing.domain.planning import Target, plan_route
from routing.domain.requests import ClientRequest
from routing.guards import default_filters, default_holders, default_recorders
from routing.guards.restatement import restate
from routing.hedging import Hedging
from routing.leasing import bound_first, lease_bind
from routing.preludes import Answer, prelude_for
from routing.proxy import JSON, ProxyConsumer
from routing.recovery import StreamRelay
from routing.relay import (
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
from routing.response_pins import pinned_plan, remember, response_id
from routing.strategies import order_targets
from routing.telemetry import target_label
from routing.upstream import Forwarded, Upstream

DEADLINE_HEADER = b"x-omniroute-deadline-ms"
ANTHROPIC_VERSION = b"anthropic-version"


_loops: dict[tuple[int, int], tuple[Upstream, StateStore, AttemptLoop]] = {}


def attempt_loop(upstream: Upstream, store: StateStore) -> AttemptLoop:
    """The attempt loop with every resilience filter and recorder, built once per pair."""
    cached = _loops.get((id(upstream), id(store)))
    if cached is not None and cached[0] is upstream and cached[1] is store:
        return cached[2]
    loop = AttemptLoop(
        upstream, default_filters(store), default_recorders(store), restate,
        default_holders(store), Hedging(store),
    )  # fmt: skip
    _loops[(id(upstream), id(store))] = (upstream, store, loop)
    return loop


class RelayConsumer(ProxyConsumer):
    """One client API, as its :class:`Endpoint` declares it: parse, plan on the targets that
    speak its wire format, run the attempt loop, relay the answer (streaming or not)."""

    def __init__(self, *args: Any, endpoint: Endpoint | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if endpoint is not None:
            self.endpoint = endpoint
        self.requested_model = "-"
        self.context: AttemptContext | None = None  # the access log reads its attempts
        self.client_deadline_at = math.inf  # ``attempts.now()``; X-OmniRoute-Deadline-Ms

    def model_label(self) -> str:
        return self.requested_model

    def target_label(self) -> str:
        return "-" if self.context is None else target_label(self.context.attempts)

    def outcomes(self) -> list[Outcome]:
        return [] if self.context is None else [outcome for _, outcome in self.context.attempts]

    async def serve(self, body: bytes) -> None:
        snapshot, key = await self.authenticated()  # before parsing: strangers cost no parse
        claim = lease_claim(key, self.scope["headers"])  # a managed key's lease, else None
        request = self.endpoint.parse(body)
        self.requested_model = request.model
        plan = plan_route(snapshot, request.model, key, self.endpoint.wire_format, request.needs)
        if claim is not None:
            check_route(snapshot, plan)
        await resilience_ready(self.store)
        if request.previous_response_id is not None:
            plan = await pinned_plan(self.store, plan, request.previous_response_id)
        context = AttemptContext(
            self.request_id, key, plan, request.stream, snapshot,
            endpoint=self.endpoint, forwarded=self._forwarded(), tools=request.tools,
            pinned=request.previous_response_id is not None,
        )  # fmt: skip
        self.context = context
        self._set_deadlines(context)
        if claim is not None:  # managed keys' one database read, before anything is held
            await lease_bind(context, claim, timezone.now())
        await order_targets(context, self.store, request.payload, self.scope["headers"])
        await keep_session_together(context, self.store, request.payload, self.scope["headers"])
        if claim is not None:
            bound_first(context)
        await context_relay.prepare(
            context, self.store, self.upstream, request.payload, self.scope["headers"]
        )
        try:
            await self.race_disconnect(self._dispatch(context, request))
        finally:
            for finish in context.on_finish:
                done = finish()
                if done is not None:
                    await done

    def _set_deadlines(self, context: AttemptContext) -> None:
        """The request's deadline until its answer begins, and the client's own (if it set
        one), which alone bounds a stream after its first token."""
        header = next((v for k, v in self.scope["headers"] if k == DEADLINE_HEADER), None)
        try:
            until_answer, client = deadline_ms(context.policy, header), client_deadline_ms(header)
        except ValueError as error:
            raise GatewayError(400, "invalid_deadline", str(error)) from error
        now = attempts.now()
        context.deadline_at = now + until_answer / 1000
        self.client_deadline_at = math.inf if client is None else now + client / 1000

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
            self.context = context
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
        relay = StreamRelay(
            loop, context, request.payload, client, target, reply, self.client_deadline_at
        )
        try:
            if not self.started:
                await self.send_headers(status=reply.status, headers=headers)
            else:  # a keep-alive sent the head before a wait: the decision leads the body
                await self.send_body(decision_comment(context, target), more_body=True)
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
        path = self.scope["path"]
        raise GatewayError(404, "not_found", f"There is no endpoint at {path}.")
