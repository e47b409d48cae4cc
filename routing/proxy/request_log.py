"""What the /v1 proxy pushes to the request log for each finished request
(``omniroute.core.observability.requestlog``; docs/operating.md, "Request log").

The record extends the access log's :class:`~routing.proxy.telemetry.AccessRecord` with what
only the request's context knows: the key's name, the target that answered, the decision trail
(every target tried, with its outcome, and every target skipped, with why), the time to the
first token of a stream and the tokens the upstream's usage block reported. Building it costs
a few attribute reads; the queue and its background writer do the rest.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from omniroute.core.observability.requestlog.record import RequestRecord, StepKind, TrailStep
from routing.domain.attempts.outcomes import Outcome
from routing.domain.client.usage import Tokens
from routing.domain.config.snapshot import KeyInfo
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext
from routing.proxy.telemetry import AccessRecord


def request_record(
    access: AccessRecord,
    *,
    key: KeyInfo | None,
    context: AttemptContext | None,
    error_code: str,
    first_token_ms: int | None,
    tokens: Tokens,
) -> RequestRecord:
    """The request log's record of one finished request."""
    answered = _answered(context)
    return RequestRecord(
        request_id=access.request_id,
        started_at=time.time() - access.latency_ms / 1000,
        endpoint=access.endpoint,
        status=access.status,
        latency_ms=access.latency_ms,
        key_name=key.name if key is not None else "",
        key_prefix="" if access.key == "-" else access.key,
        model="" if access.model == "-" else access.model,
        provider=answered.provider.slug if answered else "",
        target_model=answered.model if answered else "",
        connection_id=answered.connection.id if answered else None,
        connection_name=answered.connection.name if answered else "",
        error_code=error_code,
        time_to_first_token_ms=first_token_ms,
        tokens_in=tokens[0],
        tokens_out=tokens[1],
        attempts=access.attempts,
        trail=trail(context) if context is not None else (),
    )


def _answered(context: AttemptContext | None) -> Target | None:
    """The target whose answer the client got: the last attempt, when it succeeded."""
    if context is None or not context.loop.attempts:
        return None
    target, outcome = context.loop.attempts[-1]
    return target if outcome.ok else None


def trail(context: AttemptContext) -> tuple[TrailStep, ...]:
    """Every target considered, in the plan's order: the ones planning left out (the catalog
    says they cannot serve the request), the ones a guard skipped, and each attempt made."""
    if len(context.loop.attempts) == 1 and not context.plan.skipped and not context.loop.exclusions:
        return (_tried(*context.loop.attempts[0]),)  # most requests: one attempt, nothing else
    order = {(t.connection.id, t.model): i for i, t in enumerate(context.plan.targets)}
    steps: list[tuple[int, TrailStep]] = [
        (order.get((t.connection.id, t.model), len(order)), _skipped(t, reasons, ""))
        for t, reasons in context.plan.skipped
    ]
    for exclusion in context.loop.exclusions:
        target, seconds = exclusion.target, exclusion.retry_after_seconds
        detail = f"for {seconds:.0f}s ({exclusion.timer})" if seconds else ""
        position = order.get((target.connection.id, target.model), len(order))
        steps.append((position, _skipped(target, exclusion.reason, detail)))
    for target, outcome in context.loop.attempts:
        position = order.get((target.connection.id, target.model), len(order))
        steps.append((position, _tried(target, outcome)))
    steps.sort(key=lambda pair: pair[0])  # stable: a target's own steps keep their order
    return tuple(step for _, step in steps)


def _tried(target: Target, outcome: Outcome) -> TrailStep:
    return TrailStep(
        StepKind.TRIED,
        target.label,
        target.connection.id,
        outcome.kind.value,
        outcome.status,
        outcome.latency_ms,
        outcome.detail,
    )


def _skipped(target: Target, reason: str, detail: str) -> TrailStep:
    return TrailStep(StepKind.SKIPPED, target.label, target.connection.id, reason, detail=detail)


def error_code(body: bytes) -> str:
    """The gateway's error code in an error answer's body (``""`` when it names none)."""
    try:
        parsed: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    code = error.get("code") or error.get("type") if isinstance(error, dict) else None
    return str(code) if code else ""
