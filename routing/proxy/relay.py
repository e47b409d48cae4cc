"""Response shaping for the proxy: headers that explain the decision, failure answers, and the
head of a stream begun before a cooldown-aware wait."""

from __future__ import annotations

import math
import time
from typing import Any

import orjson

from omniroute.core.bounds import clip, header_text
from routing.domain.attempts.failures import error_parts
from routing.domain.attempts.outcomes import OutcomeKind
from routing.domain.client.errors import error_body, upstream_error_body
from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext
from routing.proxy.snapshot_memo import TargetMemo
from routing.proxy.upstream.client import RELAYED_ERROR_HEADERS, UpstreamReply

TERMINAL_COOLING = "all_targets_cooling_down"
TERMINAL_NONE = "no_executable_targets"

Headers = list[tuple[bytes, bytes]]
JSON = b"application/json"
WARNING_HEADER = b"x-omniroute-warning"
RETRY_AFTER = b"retry-after"
# Only an answer saying "unavailable for now" may tell the client when to
# come back; a 400, 401, 403, 404 or 422 is about the request, and waiting will not change it.
RETRY_AFTER_ELIGIBLE_STATUSES = frozenset({429, 503})
KEEP_ALIVE = b": keep-alive\n\n"  # an SSE comment: bytes for the client, no event


def with_warnings(body: bytes, warnings: tuple[str, ...]) -> bytes:
    """A plain JSON answer with the gateway's ``warnings`` added (``background`` served
    synchronously, ...)."""
    if not warnings:
        return body
    parsed = orjson.loads(body)  # a JSON object: the upstream client checked it
    given = parsed.get("warnings")
    parsed["warnings"] = [*(given if isinstance(given, list) else ()), *warnings]
    return orjson.dumps(parsed)


def decision_header(context: AttemptContext, target: Target | None) -> bytes:
    """``X-OmniRoute-Decision``: strategy, target, latency, attempts, exclusions and the
    targets planning skipped. A target's model may be the client's own string: each is clipped
    and the whole value escaped to printable ASCII (no CR or LF can end the header)."""
    latency_ms = int((time.monotonic() - context.facts.started) * 1000)
    parts = [f"strategy={context.plan.strategy}", *context.notes]  # a prelude's: panel, stages
    if target is not None:
        parts.append(_target_parts(target, context.facts.snapshot))
    parts += [f"latency_ms={latency_ms}", f"attempts={len(context.loop.attempts)}"]
    if context.loop.panic:  # every target was excluded by self-set timers
        parts.append("panic=1")
    if context.loop.fallback is not None:  # every target failed: the emergency fallback was asked
        parts.append(f"fallback={context.loop.fallback}")
    if context.loop.exclusions:
        parts.append("excluded=" + ",".join(e.describe() for e in context.loop.exclusions))
    if context.plan.skipped:  # planning's: the catalog says they cannot take this request
        parts.append(
            "skipped="
            + ",".join(
                f"{clip(t.label)}@{t.connection.id}:{reasons}"
                for t, reasons in context.plan.skipped
            )
        )
    return header_text("; ".join(parts))


def _named(target: Target, _: ConfigSnapshot) -> str:
    return (
        f"target={clip(target.label)}; provider={target.provider.slug}; "
        f"connection={target.connection.id}"
    )


_target_parts = TargetMemo(_named)  # the decision's words for a target, once per snapshot


def decision_comment(context: AttemptContext, target: Target) -> bytes:
    """The decision as an SSE comment, for a stream whose head went out before it was made (a
    keep-alive before a wait): ``: x-omniroute-decision: ...``."""
    return b": x-omniroute-decision: " + decision_header(context, target) + b"\n\n"


def reply_headers(context: AttemptContext, target: Target, reply: UpstreamReply) -> Headers:
    """Headers of a relayed success."""
    headers: Headers = [
        (b"content-type", reply.content_type.encode()),
        (b"x-omniroute-decision", decision_header(context, target)),
    ]
    if reply.stream is None:
        headers.append((b"content-length", str(len(reply.body)).encode()))
    else:
        headers += [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
    return headers


def keep_alive_headers() -> Headers:
    """The head of a stream answer sent before a cooldown-aware wait: a
    200 event stream, whatever the wait ends in (a failure then goes in-band)."""
    return [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
    ]


def in_band_error(status: int, body: bytes, headers: Headers) -> tuple[str, str]:
    """The message and code of a failure answer told inside a stream whose 200 head has gone
    out: the error body's, with the status it would have had and its ``Retry-After`` (which
    :func:`failure_response` kept only for a 429 or 503) as "reset after" text."""
    message, structured = error_parts(body)
    code = structured and (structured.get("code") or structured.get("type"))
    retry_after = next((v.decode() for k, v in headers if k == RETRY_AFTER), None)
    suffix = f"HTTP {status}"
    if retry_after is not None and retry_after.isdigit():
        suffix += f"; reset after {retry_after}s"
    return f"{message} ({suffix})", str(code or f"upstream_{status}")


def failure_response(context: AttemptContext) -> tuple[int, bytes, Headers]:
    """The answer when no target succeeded: the last upstream error, or why none was tried.
    It carries a ``Retry-After`` only when its status is 429 or 503."""
    status, body, headers = _failure(context)
    if status not in RETRY_AFTER_ELIGIBLE_STATUSES:
        headers = [(name, value) for name, value in headers if name != RETRY_AFTER]
    return status, body, headers


def _failure(context: AttemptContext) -> tuple[int, bytes, Headers]:
    headers: Headers = [
        (b"content-type", JSON),
        (b"x-omniroute-decision", decision_header(context, None)),
    ]
    outcome = context.loop.last_outcome
    if context.loop.deadline_hit:
        return _deadline_exceeded(context, headers)
    if outcome is None or _only_timers_kept_a_server_out(context):
        return _all_excluded(context, headers)
    if outcome.kind is OutcomeKind.LOCAL:  # a local gate's own error, already shaped
        headers += [
            (name.encode(), value.encode())
            for name, value in outcome.headers.items()
            if name != "content-type"
        ]
        return outcome.status or 503, outcome.body, headers
    if outcome.kind is OutcomeKind.HTTP_ERROR and outcome.status == 401:
        # The upstream refused *our* credential: its body may quote our key, and relaying a 401
        # would tell the client its own key is wrong.
        message = "The upstream rejected the gateway's credential for this provider."
        return 502, error_body(message, "upstream_error", "upstream_auth_failed"), headers
    if outcome.kind is OutcomeKind.HTTP_ERROR and (outcome.status or 0) < 400:
        message = f"The upstream answered with an unexpected status {outcome.status}."
        return 502, error_body(message, "upstream_error", "upstream_bad_status"), headers
    if outcome.kind is OutcomeKind.HTTP_ERROR and outcome.status is not None:
        relayed = {k: v for k, v in outcome.headers.items() if k in RELAYED_ERROR_HEADERS}
        told = _earliest_retry_after(context) or outcome.client_retry_after
        if told is not None:  # else the upstream's own header, if it sent one
            relayed["retry-after"] = told
        headers += [(name.encode(), value.encode()) for name, value in relayed.items()]
        secret = context.loop.attempts[-1][0].connection.secret  # the failing attempt's own key
        body = upstream_error_body(outcome.status, outcome.body, (secret,))
        return outcome.status, body, headers
    if outcome.kind is OutcomeKind.TIMEOUT:
        message = f"The upstream did not answer in time ({outcome.detail})."
        return 504, error_body(message, "upstream_error", "upstream_timeout"), headers
    message = f"The upstream could not be reached ({outcome.detail})."
    return 502, error_body(message, "upstream_error", "upstream_unreachable"), headers


def _only_timers_kept_a_server_out(context: AttemptContext) -> bool:
    """Every target tried in the last pass answered that it cannot serve the request (a 404
    model not found, a context too long) while a target that could serve it was held back by a
    timer: the client hears about that timer, never another target's 404."""
    tried = context.loop.attempts[context.loop.pass_start :]
    timed = any(e.retry_after_seconds for e in context.loop.exclusions if not e.held_back)
    return timed and bool(tried) and all(context.loop.cannot_serve(t) for t, _ in tried)


def _earliest_retry_after(context: AttemptContext) -> str | None:
    """When the first target of the last pass frees up, in whole seconds (the earliest
    retry-after seen across targets): each one tried told by its upstream's hint (or by what a
    restatement rule tells the client), each one excluded by its timer; ``None`` if no target
    said when."""
    seconds = [e.retry_after_seconds for e in context.loop.exclusions if e.retry_after_seconds]
    for target, outcome in context.loop.attempts[context.loop.pass_start :]:
        verdict = context.loop.verdict(target)
        if outcome.client_retry_after is not None:
            seconds.append(float(outcome.client_retry_after))
        elif verdict is not None and verdict.hint_ms:
            seconds.append(verdict.hint_ms / 1000)
    return str(_retry_after_seconds(min(seconds))) if seconds else None


def _deadline_exceeded(context: AttemptContext, headers: Headers) -> tuple[int, bytes, Headers]:
    """The request's deadline ran out: 504, with what was tried."""
    tried = [
        f"{target.label}@{target.connection.id}: {outcome.status or outcome.detail}"
        for target, outcome in context.loop.attempts
    ]
    message = "The request's deadline ran out before any target answered"
    message += f" (tried: {'; '.join(tried)})." if tried else " (no target was tried)."
    body = error_body(message, "upstream_error", "request_deadline_exceeded")
    return 504, body, headers


def _retry_after_seconds(seconds: float) -> int:
    """Whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(seconds))


def _provider_circuit_open(context: AttemptContext, headers: Headers) -> tuple[int, bytes, Headers]:
    provider = context.loop.exclusions[0].target.provider.slug
    retry_after = _retry_after_seconds(
        min(e.retry_after_seconds or 0 for e in context.loop.exclusions)
    )
    body = error_body(
        f"Provider {provider} circuit breaker is open",
        "server_error",
        "provider_circuit_open",
    )
    payload = orjson.loads(body)
    payload["error"].update(provider=provider, retry_after=retry_after)
    headers += [
        (b"retry-after", str(retry_after).encode()),
        (b"x-omniroute-provider-breaker", b"open"),
    ]
    return 503, orjson.dumps(payload), headers


def _only_one_open_circuit(context: AttemptContext) -> bool:
    """Single-model request whose every target was skipped by one open provider breaker."""
    exclusions = context.loop.exclusions
    providers = {e.target.provider.slug for e in exclusions}
    reasons = {e.reason for e in exclusions}
    return (
        context.plan.combo is None
        and reasons == {ExclusionReason.CIRCUIT_OPEN}
        and len(providers) == 1
    )


def _all_excluded(context: AttemptContext, headers: Headers) -> tuple[int, bytes, Headers]:
    """503 while a timer will free a target, 404 when none will."""
    if _only_one_open_circuit(context):
        return _provider_circuit_open(context, headers)
    waits = [e.retry_after_seconds for e in context.loop.exclusions if e.retry_after_seconds]
    if not waits:
        return _no_executable_targets(context, headers)
    retry_after = _retry_after_seconds(min(waits))
    reasons = ", ".join(
        f"{e.target.label}: {e.reason} ({math.ceil(e.retry_after_seconds or 0)}s)"
        for e in context.loop.exclusions
    )
    scope = "every target in this combo" if context.plan.combo else "every target"
    message = f"Service temporarily unavailable: {scope} is cooling down ({reasons})."
    recovery = {"action": "wait", "next_step": "retry later", "retry_after_seconds": retry_after}
    body = error_body(
        message,
        "service_unavailable",
        TERMINAL_COOLING,
        diagnostics=_diagnostics(context, TERMINAL_COOLING, recovery),
        recovery_hint=recovery,
    )
    headers += [
        (b"retry-after", str(retry_after).encode()),
        (b"x-omniroute-combo-terminal-reason", TERMINAL_COOLING.encode()),
        (b"x-omniroute-recovery-action", b"wait"),
        (b"x-omniroute-retry-after-seconds", str(retry_after).encode()),
    ]
    return 503, body, headers


def _no_executable_targets(context: AttemptContext, headers: Headers) -> tuple[int, bytes, Headers]:
    recovery = {"action": "switch-combo", "next_step": "use another model or combo"}
    message = "No target can serve this request: every one is unavailable, with no timer to wait."
    body = error_body(
        message,
        "invalid_request_error",
        TERMINAL_NONE,
        diagnostics=_diagnostics(context, TERMINAL_NONE, recovery),
        recovery_hint=recovery,
    )
    headers += [
        (b"x-omniroute-combo-terminal-reason", TERMINAL_NONE.encode()),
        (b"x-omniroute-recovery-action", b"switch-combo"),
    ]
    return 404, body, headers


def _diagnostics(context: AttemptContext, reason: str, recovery: dict[str, Any]) -> dict[str, Any]:
    excluded = [
        {"provider": e.target.provider.slug, "model": e.target.model, "reason": e.reason}
        for e in context.loop.exclusions
    ]
    return {
        "poolSize": len(excluded),
        "attempted": 0,
        "excluded": excluded,
        "attemptOrder": [],
        "terminalReason": reason,
        "recovery": recovery,
    }
