"""Pure tests of the breaker state machine: thresholds, cooldowns, lazy refresh, recovery,
429 hints, the policy, manual reset and the transition history.

No database, no sleeps: ``now`` is a number. Probe slots are in ``test_breaker_probes.py``, the
JSON and status forms in ``test_breaker_codec.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from resilience.domain.breaker.machine import (
    HISTORY_LIMIT,
    Breaker,
    BreakerPolicy,
    BreakerState,
    FailureKind,
    Permit,
)
from resilience.domain.profiles import PROFILES, ProfileName, profile_with_env
from tests.resilience.breaker_support import (
    API,
    CLOSED,
    DEGRADED,
    HALF_OPEN,
    HINTS,
    LOCAL,
    OPEN,
    POLICIES,
    T0,
    failed,
    opened,
    probing,
    reasons,
    with_cycles,
)

# -- worked examples of the profiles: thresholds ---------------------------------------------------

THRESHOLD_TABLE = [
    *[(ProfileName.APIKEY, n, CLOSED) for n in range(1, 7)],
    *[(ProfileName.APIKEY, n, DEGRADED) for n in range(7, 12)],
    (ProfileName.APIKEY, 12, OPEN),
    *[(ProfileName.OAUTH, n, CLOSED) for n in range(1, 5)],
    (ProfileName.OAUTH, 5, DEGRADED),
    (ProfileName.OAUTH, 7, DEGRADED),
    (ProfileName.OAUTH, 8, OPEN),
    (ProfileName.LOCAL, 1, CLOSED),
    (ProfileName.LOCAL, 2, OPEN),
]


@pytest.mark.parametrize(("profile", "failures", "expected"), THRESHOLD_TABLE)
def test_state_after_failures(profile: ProfileName, failures: int, expected: BreakerState) -> None:
    breaker = failed(POLICIES[profile], failures)
    assert breaker.state == expected
    assert breaker.failure_count == failures
    assert breaker.can_execute(POLICIES[profile], T0) is (expected != OPEN)


def test_local_profile_jumps_from_closed_to_open() -> None:
    assert LOCAL.effective_degradation_threshold == 2
    assert [(s.from_state, s.to_state) for s in opened(LOCAL).transitions] == [(CLOSED, OPEN)]


def test_api_key_history_goes_through_degraded() -> None:
    breaker = opened(API)
    assert reasons(breaker) == ["degraded", "threshold"]
    assert [step.failure_count for step in breaker.transitions] == [7, 12]


def test_failures_while_open_change_nothing() -> None:
    breaker = opened(API)
    assert breaker.after_failure(API, T0 + 10, FailureKind.TRANSIENT) == breaker


# -- worked examples of the profiles: cooldowns ----------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "reset"),
    [(ProfileName.APIKEY, 30.0), (ProfileName.OAUTH, 60.0), (ProfileName.LOCAL, 15.0)],
)
def test_half_open_exactly_at_reset_timeout(profile: ProfileName, reset: float) -> None:
    policy = POLICIES[profile]
    breaker = opened(policy)
    assert policy.reset_timeout == reset
    assert breaker.refreshed(policy, T0 + reset - 0.001).state == OPEN
    assert not breaker.can_execute(policy, T0 + reset - 0.001)
    assert breaker.refreshed(policy, T0 + reset).state == HALF_OPEN
    assert breaker.can_execute(policy, T0 + reset)


COOLDOWN_TABLE = [
    *[(ProfileName.APIKEY, cycles, 30.0) for cycles in range(4)],
    (ProfileName.APIKEY, 4, 60.0),
    *[(ProfileName.APIKEY, cycles, 120.0) for cycles in (5, 6, 10, 500)],
    *[(ProfileName.OAUTH, cycles, 60.0) for cycles in range(3)],
    (ProfileName.OAUTH, 3, 120.0),
    (ProfileName.OAUTH, 4, 240.0),
    *[(ProfileName.OAUTH, cycles, 480.0) for cycles in (5, 6, 9, 500)],
    *[(ProfileName.LOCAL, cycles, 15.0) for cycles in range(4)],
    (ProfileName.LOCAL, 7, 240.0),
    (ProfileName.LOCAL, 8, 240.0),
]


@pytest.mark.parametrize(("profile", "cycles", "cooldown"), COOLDOWN_TABLE)
def test_effective_cooldown_by_open_cycle(
    profile: ProfileName, cycles: int, cooldown: float
) -> None:
    breaker = Breaker(state=OPEN, open_cycle_count=cycles, last_failure_at=T0)
    assert breaker.effective_cooldown(POLICIES[profile]) == cooldown
    assert breaker.effective_reset_timeout(POLICIES[profile]) == cooldown


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (ProfileName.APIKEY, [30.0, 30.0, 30.0, 60.0, 120.0, 120.0]),
        (ProfileName.OAUTH, [60.0, 60.0, 120.0, 240.0, 480.0, 480.0]),
    ],
)
def test_failed_probes_escalate_the_open_period(
    profile: ProfileName, expected: list[float]
) -> None:
    # given a breaker that opened at T0 and is probed as soon as it half-opens
    policy = POLICIES[profile]
    breaker, now = opened(policy), T0 + policy.reset_timeout
    seen = []
    for cycle in range(1, len(expected) + 1):
        # when the probe fails
        breaker, permit = probing(policy, breaker, now)
        breaker = breaker.after_failure(policy, now, permit=permit)
        # then it is open for the escalated cooldown, and half open right after
        assert (breaker.state, breaker.open_cycle_count) == (OPEN, cycle)
        cooldown = breaker.retry_after(policy, now)
        assert breaker.refreshed(policy, now + cooldown - 0.001).state == OPEN
        assert breaker.refreshed(policy, now + cooldown).state == HALF_OPEN
        seen.append(cooldown)
        now += cooldown
    assert seen == expected


# -- lazy refresh ------------------------------------------------------------------------------

READERS: dict[str, Callable[[Breaker, float], bool]] = {
    "can_execute": lambda b, now: b.can_execute(API, now) is True,
    "retry_after": lambda b, now: b.retry_after(API, now) == 0.0,
    "refreshed": lambda b, now: b.refreshed(API, now).state == HALF_OPEN,
    "status": lambda b, now: b.status(API, now)["state"] == "half_open",
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_any_read_sees_half_open_once_cooled_down(reader: Callable[[Breaker, float], bool]) -> None:
    breaker = opened(API)
    assert not reader(breaker, T0 + 29.0)
    assert reader(breaker, T0 + 30.0)


def test_refresh_records_the_transition_and_arms_the_probe_slot() -> None:
    breaker = opened(API)
    half_open = breaker.refreshed(API, T0 + 45)
    assert reasons(half_open)[-1] == "cooldown-elapsed"
    assert half_open.transitions[-1].at == T0 + 45
    assert half_open.half_open_allowed == API.half_open_requests == 1
    assert half_open.probe_generation == breaker.probe_generation + 1


def test_open_without_failure_time_half_opens_at_once() -> None:
    breaker = Breaker(state=OPEN)
    assert breaker.refreshed(API, T0).state == HALF_OPEN
    assert breaker.retry_after(API, T0) == 0.0


def test_retry_after_counts_down_while_open() -> None:
    breaker = opened(API)
    assert breaker.retry_after(API, T0 + 10) == 20.0
    assert Breaker().retry_after(API, T0) == 0.0
    assert failed(API, 8).retry_after(API, T0) == 0.0  # DEGRADED


# -- successes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "failures", "expected_state", "expected_failures"),
    [
        (CLOSED, 0, CLOSED, 0),
        (CLOSED, 3, CLOSED, 2),
        (DEGRADED, 8, CLOSED, 7),
        (DEGRADED, 9, DEGRADED, 8),
        (DEGRADED, 11, DEGRADED, 10),
    ],
)
def test_gradual_recovery(
    state: BreakerState, failures: int, expected_state: BreakerState, expected_failures: int
) -> None:
    breaker = Breaker(state=state, failure_count=failures).after_success(API, T0)
    assert (breaker.state, breaker.failure_count) == (expected_state, expected_failures)


def test_degraded_recovers_to_closed_after_enough_successes() -> None:
    breaker = failed(API, 9)
    for _ in range(2):
        assert breaker.state == DEGRADED
        breaker = breaker.after_success(API, T0 + 1)
    assert breaker.state == CLOSED
    assert reasons(breaker) == ["degraded", "recovery"]


@pytest.mark.parametrize("with_permit", [False, True], ids=["no-permit", "non-probe-permit"])
def test_success_in_half_open_without_probe_permit_changes_nothing(with_permit: bool) -> None:
    breaker = opened(API).refreshed(API, T0 + 30)
    permit = Permit(probe=False, generation=breaker.probe_generation) if with_permit else None
    assert breaker.after_success(API, T0 + 31, permit) == breaker


def test_success_while_open_recovers_fully() -> None:
    breaker = with_cycles(opened(API), 4)
    recovered = breaker.after_success(API, T0 + 1)
    assert recovered.is_pristine and recovered.last_failure_at is None
    assert reasons(recovered)[-1] == "success-recovery"


# -- 429 hint mode -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "kind", "cycles", "cooldown"),
    [
        (HINTS, FailureKind.RATE_LIMIT, 0, 60.0),
        (HINTS, FailureKind.RATE_LIMIT, 3, 60.0),
        (HINTS, FailureKind.RATE_LIMIT, 4, 120.0),
        (HINTS, FailureKind.RATE_LIMIT, 5, 240.0),
        (HINTS, FailureKind.RATE_LIMIT, 9, 240.0),
        (HINTS, FailureKind.QUOTA_EXHAUSTED, 0, 3600.0),
        (HINTS, FailureKind.QUOTA_EXHAUSTED, 4, 7200.0),
        (HINTS, FailureKind.QUOTA_EXHAUSTED, 9, 14400.0),
        (HINTS, FailureKind.TRANSIENT, 0, 30.0),
        (HINTS, None, 4, 60.0),
        (API, FailureKind.RATE_LIMIT, 0, 30.0),
        (API, FailureKind.QUOTA_EXHAUSTED, 4, 60.0),
    ],
)
def test_kind_cooldowns(
    policy: BreakerPolicy, kind: FailureKind | None, cycles: int, cooldown: float
) -> None:
    breaker = Breaker(state=OPEN, last_failure_kind=kind, open_cycle_count=cycles)
    assert breaker.effective_cooldown(policy) == cooldown


def test_rate_limited_breaker_half_opens_after_a_minute() -> None:
    breaker = failed(HINTS, 12, kind=FailureKind.RATE_LIMIT)
    assert breaker.state == OPEN
    assert breaker.refreshed(HINTS, T0 + 59.999).state == OPEN
    assert breaker.refreshed(HINTS, T0 + 60).state == HALF_OPEN
    assert breaker.status(HINTS, T0)["effectiveResetTimeout"] == 30_000


def test_failure_kinds_are_counted() -> None:
    breaker = failed(API, 2, kind=FailureKind.RATE_LIMIT)
    breaker = failed(API, 1, start=breaker, kind=FailureKind.QUOTA_EXHAUSTED)
    breaker = failed(API, 1, start=breaker)
    assert dict(breaker.kind_failure_counts) == {"rate_limit": 2, "quota_exhausted": 1}
    assert breaker.last_failure_kind is None and breaker.failure_count == 4


def test_hint_cooldowns_only_with_the_flag() -> None:
    assert dict(HINTS.cooldown_by_kind) == {"rate_limit": 60.0, "quota_exhausted": 3600.0}
    assert dict(API.cooldown_by_kind) == {}


# -- policy ------------------------------------------------------------------------------------


def test_operator_settings_override_the_profile() -> None:
    policy = BreakerPolicy.from_profile(
        PROFILES[ProfileName.OAUTH],
        failure_threshold=3,
        degradation_threshold=2,
        reset_timeout_ms=5_000,
    )
    assert (policy.failure_threshold, policy.effective_degradation_threshold) == (3, 2)
    assert policy.reset_timeout == 5.0
    assert (policy.max_backoff_multiplier, policy.backoff_escalation_count) == (8, 2)


@pytest.mark.parametrize(
    ("threshold", "degradation"), [(1, 1), (2, 2), (3, 2), (5, 3), (10, 6), (12, 8)]
)
def test_derived_degradation_threshold(threshold: int, degradation: int) -> None:
    assert BreakerPolicy(failure_threshold=threshold).effective_degradation_threshold == degradation


def test_default_policy_matches_the_reference_constructor() -> None:
    policy = BreakerPolicy()
    assert (policy.failure_threshold, policy.reset_timeout, policy.half_open_requests) == (
        5,
        30.0,
        1,
    )
    assert (policy.max_backoff_multiplier, policy.backoff_escalation_count) == (16, 3)
    assert policy.effective_degradation_threshold == 3


@pytest.mark.parametrize(
    "changes", [{"failure_threshold": 0}, {"half_open_requests": 0}, {"reset_timeout": -1.0}]
)
def test_invalid_policy_is_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BreakerPolicy(**changes)  # type: ignore[arg-type]


# -- reset, history, pristine ------------------------------------------------------------------


def test_manual_reset_clears_everything_but_history() -> None:
    breaker = with_cycles(failed(API, 12, kind=FailureKind.TRANSIENT), 3)
    reset = breaker.reset(T0 + 5)
    assert reset.is_pristine
    assert reset == Breaker(probe_generation=reset.probe_generation, transitions=reset.transitions)
    assert reasons(reset)[-1] == "manual-reset"
    assert reset.transitions[-1].from_state == OPEN


def test_transition_ring_keeps_the_last_twenty() -> None:
    breaker = Breaker()
    for second in range(25):
        breaker = breaker.reset(T0 + second)
    assert len(breaker.transitions) == HISTORY_LIMIT == 20
    assert [step.at for step in breaker.transitions] == [T0 + s for s in range(5, 25)]


@pytest.mark.parametrize(
    ("breaker", "pristine"),
    [
        (Breaker(), True),
        (Breaker(last_failure_at=T0, kind_failure_counts={"transient": 1}), True),
        (Breaker(failure_count=1), False),
        (Breaker(open_cycle_count=1), False),
        (Breaker(state=DEGRADED), False),
        (Breaker(state=HALF_OPEN), False),
    ],
)
def test_is_pristine(breaker: Breaker, pristine: bool) -> None:
    assert breaker.is_pristine is pristine


def test_an_env_override_of_zero_keeps_the_window_default() -> None:
    env = {
        "OMNIROUTE_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS": "0.5",
        "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_RESET_MS": "0",
    }
    profile = profile_with_env(ProfileName.APIKEY, env)
    assert profile.provider_failure_window_ms == 1_800_000
    assert profile.circuit_breaker_reset_ms == 0  # a reset of 0 is honoured
