"""The /v1 proxy's declared request pipeline (docs/architecture.md, "One request").

A relay consumer runs :data:`PIPELINE` in order on one :class:`Exchange`, then dispatches:
the attempt loop (or a fusion or pipeline prelude) and the relay of its answer. Each step is a
small object that says what it writes; a later capability adds a step here rather than a
branch in the consumer. A step that refuses the request raises a ``GatewayError``, which the
consumer shell answers in the client API's own error shape.

The steps before the request's context exists write the exchange's own fields (the key, the
lease claim, the parsed request, the plan); from :class:`OpenContext` on, the plan lives in
``AttemptContext.plan`` and the ordering steps rewrite only that.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.utils import timezone

from leases.interface import LeaseClaim, lease_claim
from omniroute.core.bounds import is_header_value
from omniroute.core.store import StateStore
from resilience.domain.attempts.policy import DEADLINE_HEADER as _DEADLINE
from resilience.domain.attempts.policy import client_deadline_ms, deadline_ms
from resilience.services.housekeeping import resilience_ready
from routing.domain.client.endpoints import Endpoint
from routing.domain.client.errors import GatewayError
from routing.domain.client.requests import ClientRequest
from routing.domain.config.snapshot import ConfigSnapshot, KeyInfo
from routing.domain.plan.planning import RoutePlan, plan_route
from routing.lease_routes import check_route
from routing.proxy import clock
from routing.proxy.affinity import keep_session_together
from routing.proxy.context import AttemptContext
from routing.proxy.lease_binding import bound_first, lease_bind
from routing.proxy.response_pins import pinned_plan
from routing.proxy.upstream.client import Forwarded, Upstream
from routing.strategies import context_relay
from routing.strategies.steps import order_targets

DEADLINE_HEADER = _DEADLINE.encode()
Headers = Iterable[tuple[bytes, bytes]]


@dataclass(slots=True)
class Exchange:
    """One /v1 request as the pipeline builds it: the consumer's inputs, then what each step
    wrote (``None`` until that step ran)."""

    request_id: str
    endpoint: Endpoint
    headers: list[tuple[bytes, bytes]]
    body: bytes
    store: StateStore
    upstream: Upstream
    authenticate: Callable[[], Awaitable[tuple[ConfigSnapshot, KeyInfo]]]
    snapshot: ConfigSnapshot | None = None  # Authenticate
    key: KeyInfo | None = None  # Authenticate
    claim: LeaseClaim | None = None  # ClaimLease: a managed key's lease, else None
    request: ClientRequest | None = None  # Parse
    plan: RoutePlan | None = None  # Plan, PinToPreviousResponse
    # PinToPreviousResponse: the connection that gave the response the request continues, when
    # the plan was narrowed to it
    response_connection: int | None = None
    context: AttemptContext | None = None  # OpenContext (a prelude may replace it)
    client_deadline_at: float = math.inf  # OpenContext: the client's own deadline, monotonic
    traceparent: str | None = None  # the request's span, passed upstream when traced

    def forwarded(self) -> Forwarded:
        """The client headers its API passes upstream; a repeated header is one
        comma-separated list (RFC 9110). When traced, the request span's ``traceparent``. A
        passed header that is not printable ASCII text is the client's mistake: a 400 naming it
        (it could not be sent on as the client wrote it, or should not be)."""
        passed = self.endpoint.passed_headers
        trace = () if self.traceparent is None else (("traceparent", self.traceparent),)
        if not passed:
            return trace
        values: dict[str, list[str]] = {}
        for name, value in self.headers:
            if name in passed:
                text = value.decode("latin-1")
                if not is_header_value(text):
                    raise _not_text(name.decode("latin-1"))
                values.setdefault(name.decode("latin-1"), []).append(text)
        return tuple((name, ", ".join(given)) for name, given in values.items()) + trace


def _not_text(header: str) -> GatewayError:
    return GatewayError(
        400,
        "invalid_header",
        f"The {header} header must be printable ASCII text to be passed upstream.",
    )


class Step(Protocol):
    """One step of the pipeline: reads what earlier steps wrote, writes its own part."""

    async def run(self, exchange: Exchange) -> None: ...


class Authenticate:
    """The client key against the configuration snapshot (before parsing: strangers cost no
    parse). Writes ``snapshot`` and ``key``."""

    async def run(self, exchange: Exchange) -> None:
        exchange.snapshot, exchange.key = await exchange.authenticate()


class ClaimLease:
    """A managed key's lease, as its headers name it. Writes ``claim``."""

    async def run(self, exchange: Exchange) -> None:
        assert exchange.key is not None
        exchange.claim = lease_claim(exchange.key, exchange.headers)


class Parse:
    """The body, as the client API reads it. Writes ``request``."""

    async def run(self, exchange: Exchange) -> None:
        max_depth = settings.MAX_JSON_DEPTH
        exchange.request = exchange.endpoint.parse(exchange.body, max_depth=max_depth)


class Plan:
    """The model resolved to targets that speak the API's wire format and can give what the
    request needs; a managed key's route is checked. Writes ``plan``."""

    async def run(self, exchange: Exchange) -> None:
        snapshot, key, request = exchange.snapshot, exchange.key, exchange.request
        assert snapshot is not None and key is not None and request is not None
        wire_format = exchange.endpoint.wire_format
        # What the request needs is read from its payload only if a combo's targets are checked.
        exchange.plan = plan_route(snapshot, request.model, key, wire_format, request.needs_now)
        if exchange.claim is not None:
            check_route(snapshot, exchange.plan)


class RestoreResilience:
    """The durable resilience state is back in the state store before anything reads it
    (once per process, and after a store outage). Writes nothing of the exchange."""

    async def run(self, exchange: Exchange) -> None:
        await resilience_ready(exchange.store)


class PinToPreviousResponse:
    """A request that continues an earlier response goes to the connection that gave it.
    Rewrites ``plan``."""

    async def run(self, exchange: Exchange) -> None:
        request, plan = exchange.request, exchange.plan
        assert request is not None and plan is not None
        if request.previous_response_id is not None:
            pinned = await pinned_plan(exchange.store, plan, request.previous_response_id)
            if pinned is not plan:
                exchange.response_connection = pinned.targets[0].connection.id
            exchange.plan = pinned


class OpenContext:
    """The request's context: its facts, its plan, and its deadlines (until the answer
    begins, and the client's own, which alone bounds a stream after its first token).
    Writes ``context`` and ``client_deadline_at``."""

    async def run(self, exchange: Exchange) -> None:
        key, request, plan = exchange.key, exchange.request, exchange.plan
        assert key is not None and request is not None and plan is not None
        context = AttemptContext.start(
            exchange.request_id,
            key,
            plan,
            request.stream,
            exchange.snapshot,
            endpoint=exchange.endpoint,
            forwarded=exchange.forwarded(),
            tools=request.tools,
            hides_usage=request.hides_usage,
            pinned=request.previous_response_id is not None,
        )
        header = next((v for k, v in exchange.headers if k == DEADLINE_HEADER), None)
        try:
            until_answer, client = deadline_ms(context.policy, header), client_deadline_ms(header)
        except ValueError as error:
            raise GatewayError(400, "invalid_deadline", str(error)) from error
        now = clock.now()
        context.loop.deadline_at = now + until_answer / 1000
        exchange.client_deadline_at = math.inf if client is None else now + client / 1000
        exchange.context = context


class BindLease:
    """A managed key's lease is read and its plan narrowed to the bound connection, then the
    connections no other owner holds (its one database read, before anything is held). A
    request continuing a response that another connection gave is refused as a forced
    connection is (409 ``LEASE_CONNECTION_MISMATCH``): the lease does not move for it.
    Writes ``context.lease`` and ``context.plan``."""

    async def run(self, exchange: Exchange) -> None:
        if exchange.claim is not None:
            assert exchange.context is not None
            await lease_bind(
                exchange.context,
                exchange.claim,
                timezone.now(),
                response_connection=exchange.response_connection,
            )


class OrderByStrategy:
    """A combo's targets in the order its strategy gives. Rewrites ``context.plan``."""

    async def run(self, exchange: Exchange) -> None:
        assert exchange.context is not None and exchange.request is not None
        payload = exchange.request.payload
        await order_targets(exchange.context, exchange.store, payload, exchange.headers)


class KeepSession:
    """A client session's connection first (session affinity). Rewrites ``context.plan``
    and adds the finisher that keeps the pin."""

    async def run(self, exchange: Exchange) -> None:
        assert exchange.context is not None and exchange.request is not None
        payload = exchange.request.payload
        await keep_session_together(exchange.context, exchange.store, payload, exchange.headers)


class LeaseBindingFirst:
    """A managed request's bound connection goes first, whatever the ordering steps did.
    Rewrites ``context.plan``."""

    async def run(self, exchange: Exchange) -> None:
        if exchange.claim is not None:
            assert exchange.context is not None
            bound_first(exchange.context)


class PrepareContextRelay:
    """A context-relay combo's handoff: the summary a turn on another account starts from.
    Writes ``context.rewrite``, ``context.notes`` and finishers."""

    async def run(self, exchange: Exchange) -> None:
        context, request = exchange.context, exchange.request
        assert context is not None and request is not None
        await context_relay.prepare(
            context, exchange.store, exchange.upstream, request.payload, exchange.headers
        )


PIPELINE: tuple[Step, ...] = (
    Authenticate(),
    ClaimLease(),
    Parse(),
    Plan(),
    RestoreResilience(),
    PinToPreviousResponse(),
    OpenContext(),
    BindLease(),
    OrderByStrategy(),
    KeepSession(),
    LeaseBindingFirst(),
    PrepareContextRelay(),
)


async def run_pipeline(exchange: Exchange, steps: Iterable[Step] = PIPELINE) -> AttemptContext:
    """Run ``steps`` in order on ``exchange``; the request's context, ready to dispatch."""
    for step in steps:
        await step.run(exchange)
    assert exchange.context is not None
    return exchange.context
