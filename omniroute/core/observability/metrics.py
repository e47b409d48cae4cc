"""The gateway's metrics registry: the families ``/metrics`` exposes (docs/operating.md, "Logs,
metrics and probes"), and how apps push to it.

Counted families live in ``prometheus_client``'s default registry (per-process files when
``PROMETHEUS_MULTIPROC_DIR`` is set; ``omniroute.metrics`` adds them up). Apps push each
finished request and attempt here with its labels (``count_request``, ``count_attempt``); the
gauges read at scrape time come from collectors the apps register (``register_state``).

Every label is bounded: ``endpoint`` is a route, ``provider`` a configured provider's slug and
``model`` a model the catalog or a combo names (``bounded_model``), every other model
``other``. A request is labelled with the provider of its last attempt (the one that answered,
or failed), ``none`` when it made no attempt. The labels
of the families that existed before (``omniroute_requests_total{endpoint,status}``,
``omniroute_upstream_attempts_total{outcome}``, ``omniroute_breakers{state}``...) are kept;
labels were only added.

Each series a request counts is looked up once per process and kept (``_series``):
``labels()`` checks and converts its values and takes the family's lock on every call, about
1 µs, and a request counts six series. The kept series are as bounded as the labels.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "ADMISSION_WAIT_SECONDS",
    "ATTEMPTS",
    "ATTEMPT_RESULTS",
    "COUNTED",
    "FIRST_TOKEN_SECONDS",
    "NONE",
    "OTHER",
    "REQUESTS",
    "REQUEST_SECONDS",
    "TOKENS",
    "AttemptResult",
    "bounded_model",
    "clear_counted",
    "count_attempt",
    "count_request",
    "count_tokens",
    "observe_admission_wait",
    "register_state",
    "state_registry",
    "status_class",
]

OTHER = "other"  # a model neither the catalog nor a combo names
NONE = "none"  # no provider answered (or none was tried)

SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

REQUESTS = Counter(
    "omniroute_requests",
    "Client requests answered by the /v1 proxy, by status, the provider of the last attempt "
    "and the model asked.",
    ["endpoint", "status", "status_class", "provider", "model"],
)
REQUEST_SECONDS = Histogram(
    "omniroute_request_duration_seconds",
    "Time from a /v1 request's arrival to the end of its answer (streams included).",
    ["endpoint", "provider", "model"],
    buckets=SECONDS_BUCKETS,
)
FIRST_TOKEN_SECONDS = Histogram(
    "omniroute_time_to_first_token_seconds",
    "Time from a streamed /v1 request's arrival to its first token relayed to the client "
    "(a head or keep-alive comment is not one; the request log's time_to_first_token_ms).",
    ["endpoint", "provider", "model"],
    buckets=SECONDS_BUCKETS,
)
ATTEMPTS = Counter(
    "omniroute_upstream_attempts",
    "Upstream attempts by how they ended (success, http_error, network_error, timeout, local).",
    ["outcome", "provider"],
)
TOKENS = Counter(
    "omniroute_tokens",
    "Tokens in (prompt) and out (completion) as the usage blocks of OpenAI-format chat "
    "streams report them, by the provider of the last attempt and the model asked.",
    ["provider", "model", "direction"],
)
ADMISSION_WAIT_SECONDS = Histogram(
    "omniroute_admission_wait_seconds",
    "Time an attempt waited for its admission gate (gate) or its connection's request queue "
    "(queue), granted or not.",
    ["kind", "provider"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
ATTEMPT_RESULTS = Counter(
    "omniroute_upstream_attempt_results",
    "Upstream targets by what the request did with them: success, retried (tried again), "
    "failed_over (moved to another target), refused (a local gate said no), failed (the "
    "last, failed); and targets not counted as attempts: hedged (a hedge started on it beside "
    "a slow attempt), locked (skipped: the model was locked).",
    ["provider", "model", "result"],
)


COUNTED = (REQUESTS, REQUEST_SECONDS, FIRST_TOKEN_SECONDS, ATTEMPTS, ATTEMPT_RESULTS, TOKENS)
"""The families counted per request (tests empty them with ``clear_counted``: they are
process-wide)."""

_series: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = {}


def _series_of(family: MetricWrapperBase, *values: str) -> Any:
    """``family.labels(*values)``, looked up once (see the module docstring)."""
    key = (family, values)
    series = _series.get(key)
    if series is None:
        series = _series[key] = family.labels(*values)
    return series


# A finished request's two series by its labels as given (its status an int): one lookup for the
# request counter and its duration, where building their label tuples cost more than counting.
_request_series: dict[tuple[str, int, str, str], tuple[Any, Any]] = {}


def clear_counted() -> None:
    """Empty every family of ``COUNTED``, and forget the series kept for them."""
    for family in COUNTED:
        family.clear()
    _series.clear()
    _request_series.clear()


class AttemptResult:
    """The values of ``ATTEMPT_RESULTS``'s ``result`` label."""

    SUCCESS = "success"
    RETRIED = "retried"
    FAILED_OVER = "failed_over"
    HEDGED = "hedged"
    REFUSED = "refused"
    LOCKED = "locked"
    FAILED = "failed"


def status_class(status: int) -> str:
    """``2xx``, ``4xx``, ``5xx``... of an HTTP status."""
    return f"{status // 100}xx"


def bounded_model(model: str, known: Container[str]) -> str:
    """``model`` when it is one of ``known`` (the catalog's and the combos' models), else
    ``other``: a client's free-form model name never makes a series of its own."""
    return model if model in known else OTHER


def count_request(
    endpoint: str,
    status: int,
    provider: str,
    model: str,
    seconds: float,
    first_token_seconds: float | None = None,
) -> None:
    """Count one finished request (its labels already bounded)."""
    key = (endpoint, status, provider, model)
    series = _request_series.get(key)
    if series is None:
        labels = (endpoint, str(status), status_class(status), provider, model)
        series = _request_series[key] = (
            _series_of(REQUESTS, *labels),
            _series_of(REQUEST_SECONDS, endpoint, provider, model),
        )
    series[0].inc()
    series[1].observe(seconds)
    if first_token_seconds is not None:  # a stream's only: its series is made when one comes
        _series_of(FIRST_TOKEN_SECONDS, endpoint, provider, model).observe(first_token_seconds)


def count_tokens(provider: str, model: str, tokens_in: int, tokens_out: int) -> None:
    """Count a request's tokens, as its usage block reported them."""
    if tokens_in:
        _series_of(TOKENS, provider, model, "in").inc(tokens_in)
    if tokens_out:
        _series_of(TOKENS, provider, model, "out").inc(tokens_out)


def count_attempt(provider: str, model: str, result: str, outcome: str | None = None) -> None:
    """Count what one target did for a request; ``outcome``: the attempt's outcome kind, when
    it was tried (a locked target was not)."""
    if outcome is not None:
        _series_of(ATTEMPTS, outcome, provider).inc()
    _series_of(ATTEMPT_RESULTS, provider, model, result).inc()


def observe_admission_wait(kind: str, provider: str, seconds: float) -> None:
    """Observe one admission wait (``kind``: ``gate`` or ``queue``)."""
    ADMISSION_WAIT_SECONDS.labels(kind, provider).observe(seconds)


class _StateCollectors(Collector):
    """The gauges the apps registered, collected fresh at every scrape."""

    def __init__(self) -> None:
        self.collectors: dict[str, Collector] = {}

    def collect(self) -> Iterator[Metric]:
        for collector in list(self.collectors.values()):
            yield from collector.collect()

    def describe(self) -> Iterator[Metric]:
        return iter(())


_state = _StateCollectors()
_state_registry = CollectorRegistry(auto_describe=False)
_state_registry.register(_state)


def register_state(name: str, collector: Collector) -> None:
    """Expose ``collector``'s gauges at every scrape, under ``name`` (registering the same
    name again replaces the earlier collector)."""
    _state.collectors[name] = collector


def state_registry() -> CollectorRegistry:
    """The registry of the gauges read at scrape time."""
    return _state_registry
