"""The attempt spans of a traced /v1 request (``omniroute.core.observability.tracing``).

Written when the request finishes, one per upstream attempt, from what the attempt loop kept:
each send's start and end (``AttemptContext.attempt_times``, kept only when traced), its
target and outcome, and what the request did next (``RequestMetrics.results``: retried, failed
over, ...). An attempt that never reached a send (a local gate's refusal, a deadline already
out) is a span of no length at the request's end.
"""

from __future__ import annotations

from omniroute.core.observability.tracing import RequestTrace
from routing.proxy.context import AttemptContext
from routing.proxy.telemetry import RequestMetrics

__all__ = ["attempt_spans"]


def attempt_spans(
    trace: RequestTrace, context: AttemptContext, metrics: RequestMetrics, now_ns: int
) -> None:
    """One child span of ``trace`` per attempt of ``context``, in order."""
    times = list(context.attempt_times or ())
    hedge = context.loop.hedge
    for index, (target, outcome) in enumerate(context.loop.attempts):
        start, end = now_ns, now_ns
        found = next((i for i, (sent, _, _) in enumerate(times) if sent == target), None)
        if found is not None:
            _, start, end = times.pop(found)
        result = metrics.results[index][2] if index < len(metrics.results) else ""
        attributes: dict[str, str | int | bool] = {
            "omniroute.target": target.label,
            "omniroute.provider": target.provider.slug,
            "omniroute.connection_id": target.connection.id,
            "omniroute.outcome": outcome.kind.value,
            "omniroute.result": result,
            "omniroute.hedge": hedge is not None and target == hedge,
        }
        if outcome.status is not None:
            attributes["http.response.status_code"] = outcome.status
        if not outcome.ok:
            attributes["omniroute.reason"] = outcome.detail or outcome.kind.value
        trace.attempt(f"attempt {target.label}", start, end, attributes)
