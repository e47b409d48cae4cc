"""Pure tests of the breaker's half-open probe slots: permits, generations, stale probes.

No database, no sleeps: ``now`` is a number.
"""

from __future__ import annotations

from resilience.domain.breaker.machine import Breaker, BreakerPolicy, FailureKind, Permit
from tests.resilience.breaker_support import (
    API,
    CLOSED,
    HALF_OPEN,
    OPEN,
    T0,
    failed,
    opened,
    probing,
    reasons,
)

# -- probe slots -------------------------------------------------------------------------------


def test_half_open_gives_exactly_one_probe_permit() -> None:
    breaker = opened(API).refreshed(API, T0 + 30)
    taken, permit = breaker.acquire(API, T0 + 30)
    assert permit == Permit(probe=True, generation=breaker.probe_generation)
    assert (taken.half_open_allowed, taken.probe_started_at) == (0, T0 + 30)
    assert taken.acquire(API, T0 + 31) == (taken, None)
    assert not taken.can_execute(API, T0 + 31)
    assert taken.retry_after(API, T0 + 40) == 20.0


def test_can_execute_does_not_take_the_slot() -> None:
    breaker = opened(API).refreshed(API, T0 + 30)
    assert breaker.can_execute(API, T0 + 30)
    assert breaker.can_execute(API, T0 + 30)
    assert breaker.half_open_allowed == 1


def test_closed_and_open_permits() -> None:
    assert Breaker().acquire(API, T0) == (Breaker(), Permit(probe=False, generation=0))
    degraded = failed(API, 7)
    assert degraded.acquire(API, T0)[1] == Permit(probe=False, generation=1)
    assert opened(API).acquire(API, T0 + 1)[1] is None


def test_half_open_requests_sets_the_number_of_probes() -> None:
    policy = BreakerPolicy(failure_threshold=1, half_open_requests=2)
    breaker = failed(policy, 1).refreshed(policy, T0 + 30)
    breaker, first = breaker.acquire(policy, T0 + 30)
    breaker, second = breaker.acquire(policy, T0 + 30)
    assert first is not None and second is not None
    assert breaker.acquire(policy, T0 + 30)[1] is None


def test_probe_success_closes_and_clears_the_counters() -> None:
    # given a breaker that failed one probe and now probes again
    start = opened(API, T0).refreshed(API, T0 + 30)
    start, permit = probing(API, start, T0 + 30)
    start = start.after_failure(API, T0 + 31, FailureKind.TRANSIENT, permit)
    breaker, permit = probing(API, start, T0 + 61)
    # when the probe succeeds
    closed = breaker.after_success(API, T0 + 62, permit)
    # then
    assert closed.state == CLOSED and closed.is_pristine
    assert (closed.failure_count, closed.open_cycle_count, closed.success_count) == (0, 0, 1)
    assert (closed.last_failure_kind, dict(closed.kind_failure_counts)) == (None, {})
    assert closed.last_failure_at == T0 + 31  # kept, as in the reference
    assert reasons(closed)[-3:] == ["probe-failed", "cooldown-elapsed", "probe-success"]


def test_probe_failure_reopens_for_another_cooldown() -> None:
    breaker, permit = probing(API, opened(API), T0 + 30)
    reopened = breaker.after_failure(API, T0 + 31, permit=permit)
    assert (reopened.state, reopened.open_cycle_count) == (OPEN, 1)
    assert reopened.failure_count == 13
    assert reasons(reopened)[-1] == "probe-failed"
    assert reopened.refreshed(API, T0 + 60.999).state == OPEN
    assert reopened.refreshed(API, T0 + 61).state == HALF_OPEN


def test_stale_probe_is_rearmed_and_its_late_result_ignored() -> None:
    # given a probe taken at T0 + 30 that never reported back
    breaker, stale = probing(API, opened(API), T0 + 30)
    assert breaker.refreshed(API, T0 + 59.999) == breaker
    # when the reset timeout has passed since the probe started
    rearmed = breaker.refreshed(API, T0 + 60)
    # then the slot is back under a new generation, with no transition recorded
    assert (rearmed.state, rearmed.half_open_allowed) == (HALF_OPEN, 1)
    assert rearmed.probe_generation == stale.generation + 1
    assert rearmed.transitions == breaker.transitions
    assert rearmed.after_success(API, T0 + 61, stale) == rearmed
    assert rearmed.after_failure(API, T0 + 61, permit=stale) == rearmed
    rearmed, fresh = probing(API, rearmed, T0 + 61)
    assert fresh.generation == rearmed.probe_generation
    assert rearmed.after_success(API, T0 + 62, fresh).state == CLOSED


def test_late_result_of_a_stale_probe_after_closing_is_ignored() -> None:
    breaker, first = probing(API, opened(API), T0 + 30)
    breaker, second = probing(API, breaker.refreshed(API, T0 + 60), T0 + 60)
    closed = breaker.after_success(API, T0 + 61, second)
    assert closed.after_failure(API, T0 + 62, permit=first) == closed
    assert closed.after_failure(API, T0 + 62, permit=second) == closed


def test_failure_without_permit_in_half_open_counts_as_a_failed_probe() -> None:
    breaker = opened(API).refreshed(API, T0 + 30)
    reopened = breaker.after_failure(API, T0 + 30)
    assert (reopened.state, reopened.open_cycle_count) == (OPEN, 1)
