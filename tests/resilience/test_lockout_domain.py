"""Model lockout arithmetic, pure: scopes, escalation, caps,
quota-until-midnight, longer locks kept, success decay."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from resilience.domain.lockout import (
    DEFAULT_WINDOW_SECONDS,
    FailureState,
    Lock,
    LockoutSettings,
    LockRequest,
    LockScope,
    counts_toward_pair,
    decay,
    escalated_seconds,
    lock_scope,
    model_slot,
    model_slots,
    reason_for_status,
    record_failure,
    seconds_until_midnight,
    selected_cooldown_ms,
)

DEFAULTS = LockoutSettings()
UTC = ZoneInfo("UTC")
BERLIN = ZoneInfo("Europe/Berlin")
T0 = 1_700_000_000.0
RATE_LIMIT = LockRequest("rate_limit", window_seconds=30.0)


def _fail_times(times: int, settings: LockoutSettings = DEFAULTS, gap: float = 1.0) -> list[float]:
    """The cooldown (seconds) of each of ``times`` failures ``gap`` seconds apart."""
    state: FailureState | None = None
    lock: Lock | None = None
    cooldowns = []
    for step in range(times):
        now = T0 + step * gap
        state, lock = record_failure(state, None, RATE_LIMIT, settings, now=now, tz=UTC)
        cooldowns.append(lock.until - now)
    return cooldowns


# --- scope table and keys -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "explicit", "scope"),
    [
        (429, None, LockScope.QUOTA_FAMILY),
        (403, None, LockScope.QUOTA_FAMILY),
        (402, None, LockScope.QUOTA_FAMILY),
        (404, None, LockScope.BARE),
        (500, None, LockScope.EXACT),
        (502, None, LockScope.EXACT),  # also the gateway's own quality-validation 502
        (503, None, LockScope.EXACT),
        (504, None, LockScope.EXACT),
        (400, None, LockScope.EXACT),
        (429, LockScope.EXACT, LockScope.EXACT),  # an explicit caller scope always wins
        (404, LockScope.QUOTA_FAMILY, LockScope.QUOTA_FAMILY),
        (503, LockScope.BARE, LockScope.BARE),
    ],
)
def test_scope_table(status: int, explicit: LockScope | None, scope: LockScope) -> None:
    assert lock_scope(status, explicit) is scope


def test_quota_family_and_bare_share_a_key_exact_has_its_own() -> None:
    assert model_slot("GPT-4o", LockScope.QUOTA_FAMILY) == "m:GPT-4o"
    assert model_slot("GPT-4o", LockScope.BARE) == "m:GPT-4o"
    assert model_slot(" GPT-4o ", LockScope.EXACT) == "x:gpt-4o"  # trimmed, lower-cased
    assert model_slots("GPT-4o") == ("m:GPT-4o", "x:gpt-4o")


# --- escalation ---------------------------------------------------------------------------------


def test_default_escalation_doubles_from_120_s_and_caps_at_1800_s() -> None:
    assert _fail_times(7) == [120.0, 240.0, 480.0, 960.0, 1800.0, 1800.0, 1800.0]


@pytest.mark.parametrize(
    ("count", "seconds"),
    [(0, 120.0), (1, 120.0), (2, 240.0), (4, 960.0), (5, 1800.0), (11, 1800.0), (500, 1800.0)],
)
def test_escalated_seconds_with_the_defaults(count: int, seconds: float) -> None:
    assert escalated_seconds(count, DEFAULTS) == seconds


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (0, [5.0, 5.0, 5.0, 5.0]),
        (1, [5.0, 10.0, 10.0, 10.0]),
        (2, [5.0, 10.0, 20.0, 20.0]),
        (20, [5.0, 10.0, 20.0, 40.0]),
    ],
)
def test_max_backoff_steps_caps_the_exponent(steps: int, expected: list[float]) -> None:
    settings = LockoutSettings(
        base_cooldown_ms=5_000, max_cooldown_ms=3_600_000, max_backoff_steps=steps
    )
    assert _fail_times(4, settings) == expected


def test_without_exponential_backoff_every_failure_gets_the_base() -> None:
    settings = LockoutSettings(use_exponential_backoff=False)
    assert _fail_times(4, settings) == [120.0] * 4


def test_a_failure_after_the_window_and_the_cooldown_starts_over() -> None:
    first, lock = record_failure(None, None, RATE_LIMIT, DEFAULTS, now=T0, tz=UTC)
    inside = T0 + 30 + 120  # window 30 s + the 120 s cooldown just applied
    second, _ = record_failure(first, lock, RATE_LIMIT, DEFAULTS, now=inside, tz=UTC)
    third, _ = record_failure(second, None, RATE_LIMIT, DEFAULTS, now=inside + 30 + 241, tz=UTC)

    assert (first.failure_count, second.failure_count, third.failure_count) == (1, 2, 1)


def test_no_window_means_thirty_minutes() -> None:
    state, _ = record_failure(None, None, LockRequest("unknown"), DEFAULTS, now=T0, tz=UTC)
    assert state.window == DEFAULT_WINDOW_SECONDS == 1800.0


# --- exact cooldowns, the cap and midnight ------------------------------------------------------


@pytest.mark.parametrize(
    ("upstream_reset", "seconds"),
    [(False, 1800.0), (True, 7200.0)],  # an authoritative upstream reset bypasses the cap
)
def test_exact_cooldown_is_capped_unless_an_upstream_reset(
    upstream_reset: bool, seconds: float
) -> None:
    request = LockRequest("rate_limit", 7_200_000, upstream_reset)
    _, lock = record_failure(None, None, request, DEFAULTS, now=T0, tz=UTC)
    assert lock.until - T0 == seconds


def test_short_exact_cooldown_is_used_as_is() -> None:
    _, lock = record_failure(None, None, LockRequest("x", 7_000), DEFAULTS, now=T0, tz=UTC)
    assert lock.until - T0 == 7.0


def test_quota_exhausted_locks_until_local_midnight() -> None:
    now = dt.datetime(2025, 3, 10, 23, 45, tzinfo=BERLIN).timestamp()

    _, lock = record_failure(
        None, None, LockRequest("quota_exhausted"), DEFAULTS, now=now, tz=BERLIN
    )

    assert lock.until == dt.datetime(2025, 3, 11, tzinfo=BERLIN).timestamp()
    assert lock.reason == "quota_exhausted"


def test_a_midnight_lock_stays_within_the_cap() -> None:
    # Midnight is not an upstream reset: like any exact value it stays within maxCooldownMs,
    # so a quota failure at 22:00 locks for 30 min, not 2 h.
    now = dt.datetime(2025, 3, 10, 22, 0, tzinfo=BERLIN).timestamp()

    _, lock = record_failure(
        None, None, LockRequest("quota_exhausted"), DEFAULTS, now=now, tz=BERLIN
    )

    assert lock.until - now == DEFAULTS.max_cooldown_ms / 1000


def test_quota_exhausted_with_a_known_reset_uses_it() -> None:
    request = LockRequest("quota_exhausted", exact_cooldown_ms=60_000)
    _, lock = record_failure(None, None, request, DEFAULTS, now=T0, tz=UTC)
    assert lock.until - T0 == 60.0


@pytest.mark.parametrize(
    ("local", "hours"),
    [
        (dt.datetime(2025, 3, 10, 0, 0, 1, tzinfo=BERLIN), 24 - 1 / 3600),
        (dt.datetime(2025, 3, 10, 23, 30, tzinfo=BERLIN), 0.5),
        (dt.datetime(2025, 3, 30, 0, 30, tzinfo=BERLIN), 22.5),  # spring forward: a 23 h day
        (dt.datetime(2025, 10, 26, 0, 30, tzinfo=BERLIN), 24.5),  # fall back: a 25 h day
    ],
)
def test_seconds_until_midnight(local: dt.datetime, hours: float) -> None:
    assert seconds_until_midnight(local.timestamp(), BERLIN) == pytest.approx(hours * 3600)


# --- an existing lock ---------------------------------------------------------------------------


def test_an_existing_longer_lock_is_kept_with_the_higher_count() -> None:
    long = Lock("quota_exhausted", until=T0 + 3600, locked_at=T0 - 60, failure_count=1)
    previous = FailureState(3, T0 - 10, 30.0, 480.0)

    state, lock = record_failure(previous, long, RATE_LIMIT, DEFAULTS, now=T0, tz=UTC)

    assert state.failure_count == 4
    assert lock == Lock("quota_exhausted", T0 + 3600, T0 - 60, 4)


def test_a_shorter_existing_lock_is_replaced() -> None:
    short = Lock("rate_limit", until=T0 + 10, locked_at=T0 - 110, failure_count=1)
    previous = FailureState(1, T0 - 110, 30.0, 120.0)

    _, lock = record_failure(previous, short, RATE_LIMIT, DEFAULTS, now=T0, tz=UTC)

    assert lock == Lock("rate_limit", T0 + 240, T0, 2)


# --- success decay ------------------------------------------------------------------------------


def test_decay_halves_down_to_nothing() -> None:
    state: FailureState | None = FailureState(5, T0, 30.0, 1800.0)
    counts = []
    while state is not None:
        state = decay(state)
        counts.append(None if state is None else state.failure_count)

    assert counts == [2, 1, None]  # None: the failure state and the lock both go
    assert decay(None) is None


# --- the combo engine's helpers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason"), [(429, "rate_limit"), (403, "quota_exhausted"), (503, "unknown")]
)
def test_reason_for_status(status: int, reason: str) -> None:
    assert reason_for_status(status) == reason


@pytest.mark.parametrize(
    ("codes", "status", "counts"),
    [
        ((429, 500, 503), 429, True),
        ((429, 500, 503), 500, True),
        ((429, 500, 503), 502, False),  # not listed
        ((429, 500, 503), None, True),  # a dropped connection: no status, always counted
        ((429, 500, 503), 0, True),
        ((404, 429), 404, False),  # a 404 never counts, even listed (docs/resilience.md)
    ],
)
def test_a_transient_failure_counts_toward_its_pair_when_its_status_is_listed(
    codes: tuple[int, ...], status: int | None, counts: bool
) -> None:
    assert counts_toward_pair(LockoutSettings(error_codes=codes), status) is counts


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
def test_the_default_codes_count_timeouts_rate_limits_and_server_errors(status: int) -> None:
    assert counts_toward_pair(DEFAULTS, status)


@pytest.mark.parametrize("status", [403, 404])
def test_the_default_codes_leave_out_404_and_the_account_wide_403(status: int) -> None:
    assert not counts_toward_pair(DEFAULTS, status)


@pytest.mark.parametrize(
    ("classified", "exponential", "expected"),
    [(300_000, True, 300_000), (60_000, True, 0), (60_000, False, 120_000), (0, False, 120_000)],
)
def test_selected_cooldown_ms(classified: int, exponential: bool, expected: int) -> None:
    settings = LockoutSettings(use_exponential_backoff=exponential)
    assert selected_cooldown_ms(classified, settings) == expected
