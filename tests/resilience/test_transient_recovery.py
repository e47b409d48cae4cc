"""Recovery follows the upstream, pure: every self-set timer starts at
``availability.transientCooldownBaseMs``, doubles with each consecutive failed probe up to
``transientCooldownCapMs``, and starts again from the base after a success."""

from __future__ import annotations

import pytest

from resilience.domain.availability import AvailabilitySettings, transient_cooldown_seconds
from resilience.domain.classify.classifier import Classification, Reason
from resilience.domain.lockout import FailureState, Lock, decay, record_transient

NOW = 1_700_000_000.0
DEFAULTS = AvailabilitySettings()  # 3 in a row lock; base 2 s; cap 30 s


@pytest.mark.parametrize(
    ("failed_probes", "seconds"),
    [(0, 2), (1, 4), (2, 8), (3, 16), (4, 30), (5, 30), (64, 30), (10_000, 30), (-1, 2)],
)
def test_the_lock_doubles_per_failed_probe_up_to_the_cap(
    failed_probes: int, seconds: float
) -> None:
    assert transient_cooldown_seconds(failed_probes, base_seconds=2, cap_seconds=30) == seconds
    assert DEFAULTS.transient_cooldown_seconds(failed_probes) == seconds


@pytest.mark.parametrize(
    ("base_ms", "cap_ms", "failed_probes", "seconds"),
    [
        (100, 1_000, 0, 0.1),
        (100, 1_000, 3, 0.8),
        (100, 1_000, 4, 1.0),
        (60_000, 600_000, 3, 480),
        (60_000, 600_000, 4, 600),
        (5_000, 5_000, 0, 5),  # base = cap: a fixed timer
        (2_000, 1_000, 0, 1),  # a base above the cap never outlasts the cap
    ],
)
def test_the_sizing_follows_the_settings(
    base_ms: int, cap_ms: int, failed_probes: int, seconds: float
) -> None:
    settings = AvailabilitySettings(
        transient_cooldown_base_ms=base_ms, transient_cooldown_cap_ms=cap_ms
    )
    assert settings.transient_cooldown_seconds(failed_probes) == seconds


def _fail(
    state: FailureState | None, lock: Lock | None, at: float, *, probe: bool = False
) -> tuple[FailureState, Lock | None]:
    return record_transient(
        state, lock, reason="server_error", availability=DEFAULTS, now=NOW + at, probe=probe
    )


def _lock_length(lock: Lock | None) -> float | None:
    return None if lock is None else lock.until - lock.locked_at


def _locked_run() -> tuple[FailureState, Lock | None]:
    """Three failures in a row, at +0, +1 and +2 s: the pair is locked for the base."""
    state, lock = _fail(None, None, 0)
    state, lock = _fail(state, lock, 1)
    return _fail(state, lock, 2)


def test_each_failed_probe_doubles_the_lock_and_the_state_remembers_it() -> None:
    state, lock = _locked_run()
    assert (_lock_length(lock), state.probes) == (2, 0)
    lengths = []
    for _ in range(6):  # each probe comes when the lock has ended, and fails
        assert lock is not None
        at = lock.until - NOW
        state = FailureState.from_dict(state.to_dict())  # through the store record
        state, lock = _fail(state, None, at)
        lengths.append(_lock_length(lock))
    assert lengths == [4, 8, 16, 30, 30, 30]
    assert state.probes == 6


def test_a_failure_while_the_lock_holds_that_was_no_probe_leaves_the_lock() -> None:
    state, lock = _locked_run()

    later, kept = _fail(state, lock, 2.5)  # an attempt that started before the lock

    assert kept is lock
    assert (later.consecutive, later.probes) == (4, 0)


def test_a_panic_attempt_through_the_lock_is_a_probe() -> None:
    state, lock = _locked_run()

    later, doubled = _fail(state, lock, 3, probe=True)

    assert doubled is not None and doubled.locked_at == NOW + 3
    assert (_lock_length(doubled), later.probes) == (4, 1)


def test_a_success_starts_the_next_run_from_the_base() -> None:
    state, lock = _locked_run()
    for _ in range(2):
        assert lock is not None
        state, lock = _fail(state, None, lock.until - NOW)
    assert (_lock_length(lock), state.probes) == (8, 2)

    after = decay(state)
    assert after is not None and (after.consecutive, after.probes) == (0, 0)
    state, lock = _fail(after, None, 20)
    state, lock = _fail(state, lock, 21)
    state, lock = _fail(state, lock, 22)

    assert (_lock_length(lock), state.probes) == (2, 0)


def test_a_record_written_before_probes_were_kept_reads_as_none_failed() -> None:
    old = {"n": 3, "last": NOW, "window": 60.0, "cooldown": 30.0, "run": 3}
    assert FailureState.from_dict(old).probes == 0


RATE_LIMITED = Classification(True, 3_000, 1, Reason.RATE_LIMIT_EXCEEDED, base_cooldown_ms=3_000)


@pytest.mark.parametrize(
    ("level", "cooldown_ms", "new_level"),
    [(0, 2_000, 1), (1, 4_000, 2), (2, 8_000, 3), (3, 16_000, 4), (4, 30_000, 4), (9, 30_000, 9)],
)
def test_a_self_set_connection_cooldown_doubles_per_level_up_to_the_cap(
    level: int, cooldown_ms: int, new_level: int
) -> None:
    found = DEFAULTS.self_set_cooldown(RATE_LIMITED, level)

    assert (found.cooldown_ms, found.new_backoff_level) == (cooldown_ms, new_level)
    assert found.reason == Reason.RATE_LIMIT_EXCEEDED
