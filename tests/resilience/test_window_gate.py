"""The provider cooldown window gate: its arithmetic, then its state on
every store backend with a fake clock."""

from __future__ import annotations

import pytest

from omniroute.core.store import StateStore
from resilience.domain.profiles import PROFILES, ProfileName
from resilience.domain.window_gate import (
    WindowGatePolicy,
    connection_cooldown,
    connection_remaining,
    provider_remaining,
)
from resilience.services.window_gate import (
    CONNECTION_COOLDOWN,
    PROVIDER_COOLDOWN,
    window_gate_record_failure,
    window_gate_record_success,
    window_gate_remaining,
)
from tests.resilience.conftest import FakeClock

# API key: 15 failures within 30 min hold the provider for 10 min; connections 5 s … 300 s.
APIKEY = WindowGatePolicy.from_profile(
    PROFILES[ProfileName.APIKEY], min_retry_ms=5_000, max_retry_ms=300_000
)
WIDE = WindowGatePolicy(15, 1800.0, 600.0, min_retry_cooldown=5.0, max_retry_cooldown=86_400.0)
T = 1_700_000_000.0
PROVIDER = "openai"


# --- arithmetic -------------------------------------------------------------------------------


def test_policy_from_the_api_key_profile() -> None:
    assert APIKEY == WindowGatePolicy(15, 1800.0, 600.0, 5.0, 300.0)
    assert APIKEY.retention == 1800.0


@pytest.mark.parametrize(
    ("min_ms", "max_ms", "minimum", "maximum", "retention"),
    [
        (5_000, 300_000, 5.0, 300.0, 1800.0),  # the window is longer than the floor
        (10_000, 2_000, 10.0, 10.0, 1800.0),  # a max below the min is raised to it
        (5_000, 86_400_000, 5.0, 86_400.0, 86_400.0),  # a long max is remembered as long
    ],
)
def test_policy_connection_bounds_and_retention(
    min_ms: int, max_ms: int, minimum: float, maximum: float, retention: float
) -> None:
    policy = WindowGatePolicy.from_profile(
        PROFILES[ProfileName.LOCAL], min_retry_ms=min_ms, max_retry_ms=max_ms
    )

    assert (policy.min_retry_cooldown, policy.max_retry_cooldown) == (minimum, maximum)
    assert policy.retention == retention


@pytest.mark.parametrize(
    ("failures", "api_key", "wide"),
    [
        (-1, 0.0, 0.0),
        (0, 0.0, 0.0),
        (1, 5.0, 5.0),
        (2, 10.0, 10.0),
        (3, 20.0, 20.0),
        (6, 160.0, 160.0),
        (7, 300.0, 320.0),  # 320 s is past the 300 s cap
        (11, 300.0, 5120.0),
        (12, 300.0, 5120.0),  # the exponent stops at 10
        (100, 300.0, 5120.0),
    ],
)
def test_connection_backoff_doubles_up_to_the_cap(
    failures: int, api_key: float, wide: float
) -> None:
    assert connection_cooldown(failures, APIKEY) == api_key
    assert connection_cooldown(failures, WIDE) == wide


@pytest.mark.parametrize(
    ("failures", "last", "now", "remaining"),
    [
        (1, T, T, 5.0),
        (1, T, T + 2, 3.0),
        (1, T, T + 5, 0.0),
        (3, T, T + 19, 1.0),
        (3, T, T + 20, 0.0),
        (0, T, T, 0.0),
        (4, None, T, 0.0),
    ],
)
def test_connection_remaining(
    failures: int, last: float | None, now: float, remaining: float
) -> None:
    assert connection_remaining(failures, last, APIKEY, now) == remaining


@pytest.mark.parametrize(
    ("in_window", "last", "now", "remaining"),
    [
        (14, T, T, 0.0),  # below the threshold: not cooling at all
        (15, T, T, 600.0),
        (15, T, T + 599, 1.0),
        (15, T, T + 600, 0.0),
        (40, T, T + 100, 500.0),
        (15, None, T, 0.0),
    ],
)
def test_provider_remaining(
    in_window: int, last: float | None, now: float, remaining: float
) -> None:
    assert provider_remaining(in_window, last, APIKEY, now) == remaining


# --- state in the store -----------------------------------------------------------------------


async def record(store: StateStore, times: int = 1, connection_id: int | None = None) -> None:
    for _ in range(times):
        await window_gate_record_failure(
            store=store, provider=PROVIDER, connection_id=connection_id, policy=APIKEY
        )


async def held(store: StateStore, connection_id: int | None = None) -> tuple[str, float] | None:
    return await window_gate_remaining(
        store=store, provider=PROVIDER, connection_id=connection_id, policy=APIKEY
    )


async def test_nothing_recorded_holds_nothing(state_store: StateStore) -> None:
    assert await held(state_store) is None
    assert await held(state_store, 1) is None


async def test_a_connection_backs_off_after_each_failure(
    state_store: StateStore, fake_clock: FakeClock
) -> None:
    await record(state_store, connection_id=7)
    assert await held(state_store, 7) == (CONNECTION_COOLDOWN, 5.0)
    assert await held(state_store, 8) is None  # another connection of the provider
    assert await held(state_store) is None  # one failure does not hold the provider

    fake_clock.advance(5)
    assert await held(state_store, 7) is None
    await record(state_store, connection_id=7)
    fake_clock.advance(4)

    assert await held(state_store, 7) == (CONNECTION_COOLDOWN, 6.0)


async def test_the_provider_cools_down_at_the_threshold(
    state_store: StateStore, fake_clock: FakeClock
) -> None:
    await record(state_store, APIKEY.failure_threshold - 1)
    assert await held(state_store) is None

    await record(state_store, connection_id=3)

    assert await held(state_store) == (PROVIDER_COOLDOWN, 600.0)
    assert await held(state_store, 3) == (PROVIDER_COOLDOWN, 600.0)  # the provider comes first
    assert await held(state_store, 4) == (PROVIDER_COOLDOWN, 600.0)
    fake_clock.advance(599)
    assert await held(state_store) == (PROVIDER_COOLDOWN, 1.0)
    fake_clock.advance(1)
    assert await held(state_store) is None


@pytest.mark.parametrize(("gap", "cooling"), [(1799, True), (1800, False)])
async def test_failures_leave_the_window(
    state_store: StateStore, fake_clock: FakeClock, gap: float, cooling: bool
) -> None:
    await record(state_store, APIKEY.failure_threshold - 1)
    fake_clock.advance(gap)

    await record(state_store)

    assert (await held(state_store) is not None) == cooling


async def test_a_success_clears_the_provider_and_the_connection(
    state_store: StateStore, fake_clock: FakeClock
) -> None:
    await record(state_store, APIKEY.failure_threshold, connection_id=3)
    fake_clock.advance(100)

    await window_gate_record_success(store=state_store, provider=PROVIDER, connection_id=3)

    assert await held(state_store, 3) is None
    await record(state_store, APIKEY.failure_threshold - 1)  # the old failures are gone
    assert await held(state_store) is None
