"""What the /v1 proxy tells operators about each request: one access-log line and the
request metrics that ``/metrics`` exposes.

Both are recorded once, when the consumer finishes a request (``routing.proxy.shell``), and cost a
log call and in-memory counter updates (a few per request, one or two per attempt): the handler
does the only I/O. The access line
holds the key's display prefix, never the key, and no request header at all (so no secret and
no lease header can reach it); ``error`` names what went wrong with the last upstream attempt
when it failed (``connection reset by peer``, ``connect timeout``, ``HTTP 503``...). Its fields
travel in ``record.fields`` too, which the JSON formatter (``OMNIROUTE_LOG_FORMAT=json``)
writes as top-level keys; in the plain line a value with a space or a quote is quoted.

The metrics are pushed to the gateway's registry (``omniroute.core.observability.metrics``),
labelled by the provider of the last attempt and a bounded model (``request_metrics``: the
label values come from the request's own context and the snapshot, never from a query; the
set of models with a label of their own is built once per snapshot).

Whoever else counts requests (the operator dashboard) registers with ``on_request``: a
listener gets each finished request's record, inline, and must only count it. Every request the
consumer answers is recorded, whatever its end: served at once or after a fail-over, through a
combo, refused, an error, or left by its client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from omniroute.core.logging import SCRUBBED, scrubbed_fields
from omniroute.core.observability.metrics import (
    NONE,
    AttemptResult,
    bounded_model,
    count_attempt,
    count_request,
    count_tokens,
)
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target

__all__ = [
    "AccessRecord",
    "RequestMetrics",
    "failure_detail",
    "known_models",
    "on_request",
    "record_request",
    "request_metrics",
]

logger = logging.getLogger("omniroute.access")


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """A finished request's metric labels (bounded) and what each target did for it."""

    provider: str = NONE  # the provider of the last attempt: the one that answered, or failed
    model: str = NONE  # the model asked, bounded (``bounded_model``)
    first_token_seconds: float | None = None  # a stream's, when its first token went out
    # (provider, model, result, outcome kind or None when the target was not tried)
    results: tuple[tuple[str, str, str, str | None], ...] = ()
    tokens: tuple[int, int] = (0, 0)  # in and out, from the usage block the client got


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
    targets: int  # the distinct targets its attempts went to: more than one is a fail-over
    error: str = "-"  # the last attempt's failure (``failure_detail``), "-" when it succeeded

    @property
    def failed_over(self) -> bool:
        """Whether the request moved on from its first target to another one."""
        return self.targets > 1

    def fields(self) -> dict[str, str | int]:
        """The fields by name, in order (shallow: every value is a str or an int)."""
        return {name: getattr(self, name) for name in self.__slots__}


_listeners: list[Callable[[AccessRecord], None]] = []


def on_request(listener: Callable[[AccessRecord], None]) -> None:
    """Call ``listener(record)`` for every finished request from now on (once per listener)."""
    if listener not in _listeners:
        _listeners.append(listener)


def record_request(record: AccessRecord, metrics: RequestMetrics | None = None) -> None:
    """Count the request and its upstream attempts, and write its access-log line."""
    for listener in _listeners:
        listener(record)
    metrics = metrics or RequestMetrics()
    count_request(
        record.endpoint,
        record.status,
        metrics.provider,
        metrics.model,
        record.latency_ms / 1000,
        metrics.first_token_seconds,
    )
    for provider, model, result, outcome in metrics.results:
        count_attempt(provider, model, result, outcome)
    if metrics.tokens != (0, 0):
        count_tokens(metrics.provider, metrics.model, *metrics.tokens)
    if logger.isEnabledFor(logging.INFO):
        # Scrubbed one field at a time (most are too short to hold a credential), so the line
        # is marked and the log's filter does not scan it again.
        fields = scrubbed_fields(record.fields())
        line = " ".join(f"{name}={_plain(value)}" for name, value in fields.items())
        logger.info("access %s", line, extra={"fields": fields, SCRUBBED: True})


def _plain(value: str | int) -> str | int:
    """A value as the plain line writes it: quoted when a space or quote would split it, or a
    line break or other control character (a client's model name may hold one) would forge
    another line."""
    if isinstance(value, str) and (" " in value or '"' in value or not value.isprintable()):
        return json.dumps(value)
    return value


def failure_detail(outcomes: Sequence[Outcome]) -> str:
    """What went wrong with the last upstream attempt ("-" when there was none or it
    succeeded): how it failed at the transport, or its HTTP status."""
    if outcomes and not outcomes[-1].ok:
        return outcomes[-1].detail or outcomes[-1].kind.value
    return "-"


def targets_tried(attempts: list[tuple[Target, Outcome]]) -> int:
    """How many distinct targets the attempts went to (a retry on the same one is not new)."""
    return len({(target.connection.id, target.label) for target, _ in attempts})


def target_label(attempts: list[tuple[Target, Outcome]]) -> str:
    """The target whose answer the client got: the last attempt, when it succeeded."""
    if attempts and attempts[-1][1].ok:
        return attempts[-1][0].label
    return "-"


_known: tuple[ConfigSnapshot | None, frozenset[str]] = (None, frozenset())


def known_models(snapshot: ConfigSnapshot) -> frozenset[str]:
    """The model names that get a label of their own: the catalog's models and the combos'
    names and declared models (each bare and as ``provider/model``; a glob step's models are
    ``other`` unless the catalog has them). Built once per snapshot."""
    global _known
    if _known[0] is not snapshot:
        names: set[str] = set()
        for provider, model in snapshot.catalog:
            names.update((model, f"{provider}/{model}"))
        for combo in snapshot.combos.values():
            names.add(combo.name)
            for step in combo.steps:
                if step.model and not any(c in step.model for c in "*?["):
                    names.update((step.model, f"{step.provider}/{step.model}"))
        _known = (snapshot, frozenset(names))
    return _known[1]


def request_metrics(
    snapshot: ConfigSnapshot,
    requested: str | None,
    attempts: list[tuple[Target, Outcome]],
    *,
    hedge: Target | None = None,
    locked: Iterable[Target] = (),
    first_token_seconds: float | None = None,
    tokens: tuple[int, int] = (0, 0),
) -> RequestMetrics:
    """A request's metric labels: the provider of its last attempt (``none``: none), the
    model asked when the catalog or a combo names it (``other``; ``none`` when none was
    parsed), and the result of each attempt (``AttemptResult``), plus one for the request's
    hedge and one for each locked target it skipped."""
    known = known_models(snapshot)
    results: list[tuple[str, str, str, str | None]] = [
        (
            target.provider.slug,
            bounded_model(target.model, known),
            _result(attempts, index),
            outcome.kind.value,
        )
        for index, (target, outcome) in enumerate(attempts)
    ]
    if hedge is not None:  # started beside a slow attempt (a losing one is not in ``attempts``)
        model = bounded_model(hedge.model, known)
        results.append((hedge.provider.slug, model, AttemptResult.HEDGED, None))
    seen = set()
    for target in locked:
        pair = (target.connection.id, target.model)
        if pair not in seen:
            seen.add(pair)
            model = bounded_model(target.model, known)
            results.append((target.provider.slug, model, AttemptResult.LOCKED, None))
    provider = attempts[-1][0].provider.slug if attempts else NONE
    model = NONE if not requested else bounded_model(requested, known)
    return RequestMetrics(provider, model, first_token_seconds, tuple(results), tokens)


def _result(attempts: list[tuple[Target, Outcome]], index: int) -> str:
    target, outcome = attempts[index]
    if outcome.ok:
        return AttemptResult.SUCCESS
    if outcome.kind is OutcomeKind.LOCAL:
        return AttemptResult.REFUSED
    if index + 1 == len(attempts):
        return AttemptResult.FAILED
    after = attempts[index + 1][0]
    if (after.connection.id, after.model) == (target.connection.id, target.model):
        return AttemptResult.RETRIED
    return AttemptResult.FAILED_OVER


LOCKED_REASONS = frozenset({ExclusionReason.MODEL_LOCKOUT})
