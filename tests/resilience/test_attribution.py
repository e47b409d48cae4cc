"""Failure attribution: the narrowest scope the evidence supports."""

from __future__ import annotations

from datetime import UTC

import pytest

from resilience.domain.attribution import (
    Attribution,
    FailureSignals,
    Scope,
    TimerClass,
    attribute,
)
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.breaker.window import FailureWindow
from resilience.domain.classify.classifier import (
    DEFAULT_COOLDOWN_PROFILES,
    FailureInput,
    RuleMatch,
    RuleScope,
    classify,
)
from resilience.domain.lockout import record_transient

NOW = 1_700_000_000.0
API_KEY = DEFAULT_COOLDOWN_PROFILES["api_key"]


def judged(
    status: int,
    text: str = "",
    *,
    code: str | None = None,
    network: bool = False,
    per_model_quota: bool = True,
    hint_ms: int | None = None,
    rule: RuleMatch | None = None,
) -> Attribution:
    failure = FailureInput(
        status=status,
        text=text,
        structured_code=code,
        provider="acme",
        honors_rule_scope=rule is not None,
        rule=rule,
    )
    classification = classify(failure, API_KEY, now=NOW, tz=UTC)
    signals = FailureSignals(
        status=status,
        text=text,
        structured_code=code,
        network=network,
        per_model_quota=per_model_quota,
        hint_ms=hint_ms,
    )
    return attribute(signals, classification)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 529])
def test_server_errors_are_counted_on_the_pair(status: int) -> None:
    found = judged(status, "upstream trouble")
    assert (found.scope, found.transient, found.fail_over, found.lock_ms) == (
        Scope.PAIR,
        True,
        True,
        0,
    )
    assert found.breaker


def test_a_network_failure_is_counted_on_the_pair_and_may_count_for_the_breaker() -> None:
    found = judged(502, "ConnectError", network=True)
    assert (found.scope, found.transient, found.breaker) == (Scope.PAIR, True, True)


def test_a_429_without_a_hint_is_a_transient_failure_of_the_pair() -> None:
    found = judged(429, "slow down")
    assert (found.scope, found.transient, found.lock_ms) == (Scope.PAIR, True, 0)


def test_a_hinted_429_locks_the_pair_for_exactly_the_hint() -> None:
    found = judged(429, "slow down", hint_ms=2_000)
    assert (found.scope, found.lock_ms, found.timer) == (Scope.PAIR, 2_000, TimerClass.HINTED)
    assert not found.transient


def test_a_hinted_503_locks_the_pair_for_the_hint() -> None:
    found = judged(503, "maintenance", hint_ms=600_000)
    assert (found.scope, found.lock_ms, found.timer) == (Scope.PAIR, 600_000, TimerClass.HINTED)


def test_a_429_on_an_account_wide_quota_provider_is_the_connection_s() -> None:
    found = judged(429, "slow down", per_model_quota=False)
    assert (found.scope, found.timer) == (Scope.CONNECTION, TimerClass.SELF_SET)
    hinted = judged(429, "slow down", per_model_quota=False, hint_ms=7_000)
    assert hinted.scope is Scope.CONNECTION


def test_quota_text_without_a_hint_locks_the_pair_as_quota() -> None:
    found = judged(429, "Daily quota exceeded for this model")
    assert found.scope is Scope.PAIR
    assert found.timer is TimerClass.QUOTA and found.lock_ms > 0


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (401, "Incorrect API key provided"),
        (402, "Payment required"),
        (403, "Your account has been deactivated"),
        (403, "forbidden"),
    ],
)
def test_credential_and_account_failures_are_the_connection_s(status: int, text: str) -> None:
    found = judged(status, text)
    assert (found.scope, found.fail_over) == (Scope.CONNECTION, True)
    assert not found.breaker


@pytest.mark.parametrize(
    ("status", "text", "code", "reason", "fail_over"),
    [
        (404, "The model `x` does not exist", "model_not_found", "model_not_found", True),
        (400, "maximum context length is 8192 tokens", None, "context_length", True),
        (400, "too long", "context_length_exceeded", "context_length", True),
        (400, "too many tools (max 128)", None, "tool_limit", True),  # another target may
        (400, "rejected by our content policy", None, "content_policy", False),
        (400, "temperature must be at most 2", None, "invalid_request", False),
        (422, "unprocessable", None, "invalid_request", False),
        (413, "payload too large", None, "invalid_request", False),
    ],
)
def test_client_mistakes_stay_with_the_request(
    status: int, text: str, code: str | None, reason: str, fail_over: bool
) -> None:
    found = judged(status, text, code=code)
    assert (found.scope, found.reason, found.fail_over) == (Scope.REQUEST, reason, fail_over)
    assert not (found.transient or found.breaker or found.lock_ms)


def test_a_retired_model_locks_the_pair() -> None:
    found = judged(404, "This model has been retired")
    assert found.scope is Scope.PAIR and found.lock_ms > 0
    assert found.timer is TimerClass.OPERATOR


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (RuleScope.MODEL, Scope.PAIR),
        (RuleScope.CONNECTION, Scope.CONNECTION),
        (RuleScope.PROVIDER, Scope.PROVIDER),
    ],
)
def test_operator_rules_choose_their_scope(scope: RuleScope, expected: Scope) -> None:
    found = judged(429, "org cap", rule=RuleMatch("quota_exhausted", scope, 90_000))
    assert (found.scope, found.timer) == (expected, TimerClass.OPERATOR)


# --- the pair's run of transient failures ------------------------------

AVAILABILITY = AvailabilitySettings()  # 3 in a row; 2 s doubling per failed probe to 30 s


def test_a_run_locks_the_pair_at_the_threshold_for_the_base() -> None:
    state, lock = None, None
    for failure in range(1, 3):
        state, lock = record_transient(
            state, lock, reason="server_error", availability=AVAILABILITY, now=NOW + failure
        )
        assert lock is None and state.consecutive == failure
    state, lock = record_transient(
        state, lock, reason="server_error", availability=AVAILABILITY, now=NOW + 3
    )
    assert lock is not None and lock.self_set
    assert lock.until - (NOW + 3) == 2  # the availability base, whatever modelLockout says


def test_a_stale_run_starts_again() -> None:
    state, _ = record_transient(
        None, None, reason="x", availability=AVAILABILITY, now=NOW, window_seconds=60
    )
    later, lock = record_transient(
        state, None, reason="x", availability=AVAILABILITY, now=NOW + 61, window_seconds=60
    )
    assert (later.consecutive, lock) == (1, None)


# --- the breaker's failure-rate window -----------------------------------------


def test_the_failure_that_opens_the_window_is_not_one_of_its_calls() -> None:
    # Counting it would start every window with a failure: a biased sample.
    opened = FailureWindow().with_call(NOW, 60, failed=True)
    assert (opened.started_at, opened.calls, opened.failures) == (NOW, 0, 0)
    counted = opened.with_call(NOW + 1, 60, failed=True)
    assert (counted.calls, counted.failures) == (1, 1)
    expired = counted.with_call(NOW + 61, 60, failed=True)
    assert (expired.started_at, expired.calls, expired.failures) == (NOW + 61, 0, 0)


def test_the_window_trips_on_a_rate_among_successes_only() -> None:
    window = FailureWindow().with_call(NOW, 60, failed=True)  # opens it
    for turn in range(10):
        window = window.with_call(NOW + turn, 60, failed=turn % 2 == 0)
    assert window.tripped(10, 50)
    assert not window.tripped(11, 50)  # too few calls
    assert not window.tripped(10, 60)  # too low a rate
    run = FailureWindow()
    for turn in range(10):
        run = run.with_call(NOW + turn, 60, failed=True)
    assert not run.tripped(10, 50)  # an unbroken run is the consecutive thresholds' business


def test_a_5xx_counts_only_once_a_second_pair_failed_within_the_window() -> None:
    window, counts = FailureWindow(started_at=NOW).with_source("1:a", NOW, 60)
    assert not counts
    window, counts = window.with_source("1:a", NOW + 1, 60)
    assert not counts  # the same pair again
    window, counts = window.with_source("2:a", NOW + 2, 60)
    assert counts
    _, counts = window.with_source("3:a", NOW + 200, 60)
    assert not counts  # the others left the window


def test_the_window_ends_after_its_span() -> None:
    window = FailureWindow().with_call(NOW, 60, failed=True)
    assert window.active(NOW + 59, 60) and not window.active(NOW + 60, 60)
    assert window.with_call(NOW + 61, 60, failed=True).calls == 0  # opens the next window
