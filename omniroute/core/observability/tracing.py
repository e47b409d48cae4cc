"""OpenTelemetry traces of the /v1 proxy (the optional extra ``omniroute[otel]``; the variable
``OTEL_EXPORTER_OTLP_ENDPOINT`` in docs/configuration.md).

With the variable set, each client request is one span (its parent the client's
``traceparent``, when it sent one) and each upstream attempt one child span, written when the
request finishes from what the attempt loop kept (``RequestTrace.attempt``); the request
span's ``traceparent`` goes upstream with every attempt. Spans leave through a batching OTLP
exporter, off the request's path.

Unset, nothing is imported and nothing is exported: ``start_request`` answers ``None`` after
one check of a module-level flag, and the proxy does nothing more. Set without the extra
installed, the gateway logs one warning and traces nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENDPOINT_VARIABLE",
    "RequestTrace",
    "start_request",
    "tracing_configure",
    "tracing_use",
]

logger = logging.getLogger(__name__)

ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACER_NAME = "omniroute"
Attributes = Mapping[str, str | int | bool]


@dataclass(slots=True)
class _Tracing:
    configured: bool = False
    tracer: Any = None  # an OpenTelemetry tracer, or None: tracing is off


_tracing = _Tracing()


def tracing_configure(endpoint: str) -> None:
    """Trace to the OTLP ``endpoint`` (the exporter reads ``OTEL_EXPORTER_OTLP_*`` itself), or
    turn tracing off when it is empty."""
    _tracing.configured = True
    _tracing.tracer = None
    if not endpoint:
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "%s is set but OpenTelemetry is not installed (pip install 'omniroute[otel]'): "
            "no traces",
            ENDPOINT_VARIABLE,
        )
        return
    provider = TracerProvider(resource=Resource.create({"service.name": "omniroute"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracing_use(provider)


def tracing_use(provider: Any) -> None:
    """Trace through ``provider`` (an SDK ``TracerProvider``; ``None``: off). Tests hand in one
    with an in-memory exporter."""
    _tracing.configured = True
    _tracing.tracer = None if provider is None else provider.get_tracer(TRACER_NAME)


def _tracer() -> Any:
    if not _tracing.configured:
        from django.conf import settings

        tracing_configure(getattr(settings, "OTEL_EXPORTER_OTLP_ENDPOINT", ""))
    return _tracing.tracer


class RequestTrace:
    """One client request's span, and its attempts' child spans."""

    __slots__ = ("_context", "_span", "_tracer")

    def __init__(self, tracer: Any, span: Any) -> None:
        from opentelemetry.trace import set_span_in_context

        self._tracer, self._span = tracer, span
        self._context = set_span_in_context(span)

    def traceparent(self) -> str:
        """The W3C ``traceparent`` of the request's span, for the upstream requests."""
        found = self._span.get_span_context()
        return f"00-{found.trace_id:032x}-{found.span_id:016x}-{int(found.trace_flags):02x}"

    def attempt(self, name: str, start_ns: int, end_ns: int, attributes: Attributes) -> None:
        """One upstream attempt's span, a child of the request's."""
        span = self._tracer.start_span(
            name, context=self._context, start_time=start_ns, attributes=dict(attributes)
        )
        span.end(end_time=max(end_ns, start_ns))

    def end(self, attributes: Attributes, error: bool) -> None:
        """End the request's span with what it answered."""
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attributes(dict(attributes))
        if error:
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end()


def start_request(name: str, headers: list[tuple[bytes, bytes]]) -> RequestTrace | None:
    """The span of a request that arrived with ``headers`` (ASGI's: lower-case names), or
    ``None`` when tracing is off."""
    tracer = _tracer()
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {
        key: value.decode("latin-1")
        for name_, value in headers
        if (key := name_.decode("latin-1")) in ("traceparent", "tracestate")
    }
    parent = TraceContextTextMapPropagator().extract(carrier) if carrier else None
    span = tracer.start_span(name, context=parent, kind=SpanKind.SERVER)
    return RequestTrace(tracer, span)
