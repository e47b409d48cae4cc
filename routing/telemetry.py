"""What the /v1 proxy tells operators about each request: one access-log line and the
request metrics that ``/metrics`` exposes.

Both are recorded once, when the consumer finishes a request (``routing.proxy``), and cost a
log call and three in-memory counter updates: the handler does the only I/O. The access line
holds the key's display prefix, never the key, and no request header at all (so no secret and
no lease header can reach it); ``error`` names what went wrong with the last upstream attempt
when it failed (``connection reset by peer``, ``connect timeout``, ``HTTP 503``...). Its fields
travel in ``record.fields`` too, which the JSON formatter (``OMNIROUTE_LOG_FORMAT=json``)
writes as top-level keys; in the plain line a value with a space or a quote is quoted.

The metrics live in ``prometheus_client``'s default registry. When ``PROMETHEUS_MULTIPROC_DIR``
is set before the process starts, the library keeps them in per-process files there and
``/metrics`` adds up every process's files (``omniroute.metrics``).

Whoever else counts requests (the operator dashboard) registers with ``on_request``: a
listener gets each finished request's status, inline, and must only count it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from routing.domain.outcomes import Outcome
from routing.domain.planning import Target

__all__ = [
    "ATTEMPTS", "REQUESTS", "REQUEST_SECONDS", "AccessRecord", "failure_detail", "on_request",
    "record_request",
]  # fmt: skip

logger = logging.getLogger("omniroute.access")

REQUESTS = Counter(
    "omniroute_requests", "Client requests answered by the /v1 proxy.", ["endpoint", "status"]
)
REQUEST_SECONDS = Histogram(
    "omniroute_request_duration_seconds",
    "Time from a /v1 request's arrival to the end of its answer (streams included).",
    ["endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
ATTEMPTS = Counter(
    "omniroute_upstream_attempts",
    "Upstream attempts by how they ended (success, http_error, network, timeout, ...).",
    ["outcome"],
)


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One finished /v1 request as the access log and the metrics see it."""

    request_id: str
    method: str
    endpoint: str  # the route, not the path: /v1/models/{model} is one endpoint
    key: str  # the client key's display prefix, "-" when none was accepted
    model: str
    target: str  # provider/model that answered, "-" when none did
    status: int  # 499 when the client left before any answer
    attempts: int
    latency_ms: int
    bytes: int  # response body bytes sent to the client
    error: str = "-"  # the last attempt's failure (``failure_detail``), "-" when it succeeded

    def fields(self) -> dict[str, str | int]:
        """The fields by name, in order (shallow: every value is a str or an int)."""
        return {name: getattr(self, name) for name in self.__slots__}


_listeners: list[Callable[[int], None]] = []


def on_request(listener: Callable[[int], None]) -> None:
    """Call ``listener(status)`` for every finished request from now on (once per listener)."""
    if listener not in _listeners:
        _listeners.append(listener)


def record_request(record: AccessRecord, outcomes: Iterable[Outcome] = ()) -> None:
    """Count the request and its upstream attempts, and write its access-log line."""
    for listener in _listeners:
        listener(record.status)
    REQUESTS.labels(record.endpoint, str(record.status)).inc()
    REQUEST_SECONDS.labels(record.endpoint).observe(record.latency_ms / 1000)
    for outcome in outcomes:
        ATTEMPTS.labels(outcome.kind.value).inc()
    if logger.isEnabledFor(logging.INFO):
        fields = record.fields()
        line = " ".join(f"{name}={_plain(value)}" for name, value in fields.items())
        logger.info("access %s", line, extra={"fields": fields})


def _plain(value: str | int) -> str | int:
    """A value as the plain line writes it: quoted when a space or quote would split it."""
    if isinstance(value, str) and (" " in value or '"' in value):
        return json.dumps(value)
    return value


def failure_detail(outcomes: Sequence[Outcome]) -> str:
    """What went wrong with the last upstream attempt ("-" when there was none or it
    succeeded): how it failed at the transport, or its HTTP status."""
    if outcomes and not outcomes[-1].ok:
        return outcomes[-1].detail or outcomes[-1].kind.value
    return "-"


def target_label(attempts: list[tuple[Target, Outcome]]) -> str:
    """The target whose answer the client got: the last attempt, when it succeeded."""
    if attempts and attempts[-1][1].ok:
        return attempts[-1][0].label
    return "-"
