"""The Retry-After of a request no target served (pure): only a 429 or
503 answer carries one, and then the earliest any target of the last pass named (its
upstream's hint, what a restatement rule tells the client, or the timer that excluded it); a
400, 401, 403, 404 or 422 never carries one, its own or another target's. A failure told
in-band (after a keep-alive) says the same as "reset after" text."""

from __future__ import annotations

import orjson
import pytest

from resilience.domain.attribution import Attribution, Scope, TimerClass
from resilience.services.attribution import Verdict
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.config.snapshot import ConnectionInfo, KeyInfo, ProviderInfo
from routing.domain.config.vocabulary import ExclusionReason, WireFormat
from routing.domain.plan.planning import RoutePlan, Target
from routing.proxy.context import AttemptContext, Exclusion
from routing.proxy.relay import Headers, failure_response, in_band_error

KEY = KeyInfo(1, "client", "sk-omr-x", frozenset(), (), frozenset(), True, None, None)
ALPHA = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)


def target(connection_id: int) -> Target:
    connection = ConnectionInfo(
        connection_id,
        "alpha",
        f"c{connection_id}",
        connection_id,
        "https://alpha.test/v1",
        "api_key",
        secret=f"sk-alpha-{connection_id}",
    )
    return Target(ALPHA, connection, "m")


A, B, C = target(1), target(2), target(3)


def context() -> AttemptContext:
    return AttemptContext.start("r1", KEY, RoutePlan("duo", "priority", (A, B, C), "duo"), False)


def failed(
    ctx: AttemptContext,
    where: Target,
    status: int,
    hint_ms: int | None = None,
    headers: dict[str, str] | None = None,
    client_retry_after: str | None = None,
) -> None:
    """An attempt on ``where`` answered ``status``; its verdict carries the upstream's hint."""
    body = orjson.dumps({"error": {"message": f"upstream said {status}", "code": "c"}})
    outcome = Outcome(
        OutcomeKind.HTTP_ERROR, status, headers or {}, body, client_retry_after=client_retry_after
    )
    ctx.loop.attempts.append((where, outcome))
    attribution = Attribution(Scope.PAIR, True, timer=TimerClass.HINTED, lock_ms=hint_ms or 0)
    ctx.loop.verdicts[(where.connection.id, where.model)] = Verdict(attribution, hint_ms=hint_ms)


def retry_after(headers: Headers) -> str | None:
    return next((v.decode() for k, v in headers if k == b"retry-after"), None)


def test_a_429_carries_the_earliest_hint_of_the_pass_not_only_its_own() -> None:
    ctx = context()
    failed(ctx, A, 503, hint_ms=5_000, headers={"retry-after": "5"})
    failed(ctx, B, 429, hint_ms=30_000, headers={"retry-after": "30"})

    status, _, headers = failure_response(ctx)

    assert (status, retry_after(headers)) == (429, "5")


def test_a_503_counts_the_timer_of_a_target_excluded_in_the_pass() -> None:
    ctx = context()
    ctx.loop.exclusions.append(Exclusion(A, ExclusionReason.MODEL_LOCKOUT, 11.2, TimerClass.HINTED))
    failed(ctx, B, 503, hint_ms=40_000, headers={"retry-after": "40"})

    status, _, headers = failure_response(ctx)

    assert (status, retry_after(headers)) == (503, "12")  # whole seconds, rounded up


def test_hints_of_an_earlier_pass_are_not_counted() -> None:
    ctx = context()
    failed(ctx, A, 429, hint_ms=1_000, headers={"retry-after": "1"})
    ctx.loop.pass_start = len(ctx.loop.attempts)  # a wait, then another pass
    failed(ctx, B, 429, hint_ms=20_000, headers={"retry-after": "20"})

    assert retry_after(failure_response(ctx)[2]) == "20"


@pytest.mark.parametrize(
    ("upstream", "answered"),
    [
        (400, 400),
        (401, 502),
        (403, 403),
        (404, 404),
        (422, 422),
        (500, 500),
        (504, 504),
    ],
)
def test_an_answer_other_than_429_or_503_never_carries_a_retry_after(
    upstream: int, answered: int
) -> None:
    ctx = context()
    failed(ctx, A, 429, hint_ms=5_000, headers={"retry-after": "5"})
    failed(ctx, B, upstream, hint_ms=9_000, headers={"retry-after": "9"})  # even its own

    status, _, headers = failure_response(ctx)

    assert (status, retry_after(headers)) == (answered, None)


def test_what_a_restatement_tells_the_client_counts_as_that_targets_hint() -> None:
    ctx = context()
    failed(ctx, B, 429, client_retry_after="60")
    ctx.loop.verdicts.clear()  # no hint of the upstream's own

    assert retry_after(failure_response(ctx)[2]) == "60"


def test_without_any_known_hint_the_upstreams_own_header_is_relayed() -> None:
    ctx = context()
    date = "Wed, 21 Oct 2026 07:28:00 GMT"
    failed(ctx, B, 429, headers={"retry-after": date})
    ctx.loop.verdicts.clear()  # no recorder spoke (as in a bare attempt loop)

    assert retry_after(failure_response(ctx)[2]) == date


@pytest.mark.parametrize(("status", "kept"), [(429, "3"), (504, None)])
def test_a_local_gates_answer_passes_the_gate_too(status: int, kept: str | None) -> None:
    ctx = context()
    body = orjson.dumps({"error": {"message": "local", "code": "local"}})
    local = Outcome(OutcomeKind.LOCAL, status, {"retry-after": "3"}, body)
    ctx.loop.attempts.append((A, local))

    assert retry_after(failure_response(ctx)[2]) == kept


def test_the_all_excluded_503_keeps_its_retry_after() -> None:
    ctx = context()
    ctx.loop.exclusions += [
        Exclusion(t, ExclusionReason.MODEL_LOCKOUT, 30.0, TimerClass.HINTED) for t in (A, B, C)
    ]

    status, _, headers = failure_response(ctx)

    assert (status, retry_after(headers)) == (503, "30")


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (429, [(b"retry-after", b"7")], "upstream said 429 (HTTP 429; reset after 7s)"),
        (404, [], "upstream said 404 (HTTP 404)"),
        (429, [(b"retry-after", b"Wed, 21 Oct 2026 07:28:00 GMT")], "upstream said 429 (HTTP 429)"),
    ],
)
def test_in_band_the_gated_retry_after_becomes_reset_after_text(
    status: int, headers: Headers, message: str
) -> None:
    body = orjson.dumps({"error": {"message": f"upstream said {status}", "code": "c"}})

    assert in_band_error(status, body, headers) == (message, "c")


def test_in_band_the_code_falls_back_to_the_type_then_the_status() -> None:
    typed = orjson.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})

    assert in_band_error(503, typed, [])[1] == "overloaded_error"
    assert in_band_error(502, b"not json", []) == ("not json (HTTP 502)", "upstream_502")
