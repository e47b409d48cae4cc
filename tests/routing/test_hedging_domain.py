"""The pure part of hedging: the delay from the settings and the
learned first-token times, the samples kept per (provider, model), and the hedge budget."""

from __future__ import annotations

import pytest

from leases.interface import LeaseClaim
from resilience.domain.attempts.policy import AttemptPolicy
from routing.domain.attempts.hedging import (
    KEPT_SAMPLES,
    FirstTokenTimes,
    HedgeBudget,
    hedge_delay_ms,
    learned_delay_ms,
    merge_samples,
    percentile,
    recent,
)
from routing.domain.config.snapshot import KeyInfo
from routing.domain.plan.planning import RoutePlan
from routing.proxy.context import AttemptContext
from routing.proxy.hedging import Hedging
from tests.routing.test_ordering import A, B

NOW = 1_700_000_000.0
KEY = KeyInfo(1, "client", "sk-omr-x", frozenset(), ("alpha/*",), frozenset(), True, None, None)
DEFAULTS = AttemptPolicy()
PAIR = ("acme", "m1")


def fast(count: int, ms: float = 300.0, at: float = NOW) -> list[tuple[float, float]]:
    return [(at - i, ms) for i in range(count)][::-1]


# --- the delay ----------------------------------------------------------------------------------


def test_twenty_fast_samples_give_the_two_second_floor() -> None:
    times = recent(fast(20), NOW)

    assert hedge_delay_ms(DEFAULTS, None, times) == 2_000


def test_the_learned_delay_is_three_times_the_p95() -> None:
    times = [100.0] * 19 + [1_000.0] * 1  # the 95th percentile of 20 is the 19th: 100
    assert learned_delay_ms(times) == 2_000
    slow = [1_000.0] * 18 + [5_000.0] * 2  # the 19th is 5 000
    assert learned_delay_ms(slow) == 15_000
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0


def test_fewer_than_twenty_samples_keep_the_configured_delay() -> None:
    times = recent(fast(19), NOW)

    assert learned_delay_ms(times) is None
    assert hedge_delay_ms(DEFAULTS, None, times) == 10_000
    assert hedge_delay_ms(AttemptPolicy(hedge_after_ms=3_000), None, times) == 3_000


def test_the_catalog_entry_comes_before_the_combo_or_global_setting() -> None:
    assert hedge_delay_ms(AttemptPolicy(hedge_after_ms=3_000), 4_000, []) == 4_000


def test_samples_older_than_ten_minutes_are_ignored() -> None:
    old = fast(20, at=NOW - 601)
    samples = old + fast(5)

    assert len(recent(samples, NOW)) == 5
    assert hedge_delay_ms(DEFAULTS, None, recent(samples, NOW)) == 10_000


def test_only_the_last_two_hundred_first_tokens_count() -> None:
    samples = fast(KEPT_SAMPLES, ms=9_000.0, at=NOW - 300) + fast(20, ms=100.0)

    times = recent(samples, NOW)

    assert len(times) == KEPT_SAMPLES
    assert learned_delay_ms(times) == 27_000  # 20 fast ones among 200 slow ones


@pytest.mark.parametrize(
    ("policy", "catalog_ms"),
    [
        (AttemptPolicy(hedge_after_ms=0), None),
        (AttemptPolicy(hedge_enabled=False), None),
        (DEFAULTS, 0),
        (AttemptPolicy(hedge_after_ms=0), 4_000),
    ],
)
def test_off_at_any_level_is_off_whatever_was_learned(
    policy: AttemptPolicy, catalog_ms: int | None
) -> None:
    assert hedge_delay_ms(policy, catalog_ms, recent(fast(50), NOW)) is None
    assert hedge_delay_ms(policy, catalog_ms, []) is None


# --- the samples --------------------------------------------------------------------------------


def test_the_store_keeps_the_last_two_hundred_per_pair() -> None:
    times = FirstTokenTimes()
    for i in range(250):
        times.add(PAIR, float(i), NOW + i)

    kept = times.times(PAIR, NOW + 250)
    assert len(kept) == KEPT_SAMPLES and kept[0] == 50.0
    assert times.times(("acme", "other"), NOW) == []


def test_new_samples_are_handed_out_once_for_merging() -> None:
    times = FirstTokenTimes()
    times.add(PAIR, 300.0, NOW)

    assert times.take_new() == {PAIR: [(NOW, 300.0)]}
    assert times.take_new() == {}


def test_a_shared_copy_replaces_the_view_and_keeps_what_is_pending() -> None:
    times = FirstTokenTimes()
    times.add(PAIR, 100.0, NOW)
    times.take_new()
    times.add(PAIR, 200.0, NOW + 1)  # added after the copy was taken

    times.replace(PAIR, [(NOW - 5, 900.0), (NOW, 100.0)])

    assert times.times(PAIR, NOW + 2) == [900.0, 100.0, 200.0]


def test_merging_keeps_order_age_and_count() -> None:
    shared = [(NOW - 700, 1.0), (NOW - 10, 2.0)]
    new = [(NOW - 5, 3.0)]

    assert merge_samples(shared, new, NOW) == [(NOW - 10, 2.0), (NOW - 5, 3.0)]
    assert len(merge_samples(fast(150), fast(150, at=NOW - 200), NOW)) == KEPT_SAMPLES


# --- the budget ---------------------------------------------------------------------------------


def test_at_most_the_share_of_a_minute_attempts_are_hedges() -> None:
    budget = HedgeBudget()
    for _ in range(9):
        budget.count("m", NOW)
    assert budget.allows("m", 10, NOW)  # the first hedge of the minute
    budget.count("m", NOW, hedge=True)

    assert not budget.allows("m", 10, NOW)  # 2 of 11 would be 18 %
    for _ in range(9):
        budget.count("m", NOW)
    assert budget.allows("m", 10, NOW)  # 2 of 20 is 10 %


def test_the_minute_slides() -> None:
    budget = HedgeBudget()
    budget.count("m", NOW, hedge=True)
    assert not budget.allows("m", 10, NOW + 30)

    assert budget.allows("m", 10, NOW + 60)


def test_a_zero_share_never_hedges_and_models_are_apart() -> None:
    budget = HedgeBudget()
    budget.count("a", NOW, hedge=True)

    assert not budget.allows("b", 0, NOW)
    assert budget.allows("b", 10, NOW)
    assert budget.allows("a", 100, NOW)


@pytest.mark.parametrize(
    ("stream", "managed", "pinned", "rest", "hedged"),
    [
        (True, False, False, 1, True),
        (False, False, False, 1, False),  # plain requests are never hedged
        (True, True, False, 1, False),  # a managed key's request stays on its lease
        (True, False, True, 1, False),  # pinned by previous_response_id
        (True, False, False, 0, False),  # nothing to hedge to
    ],
)
def test_which_requests_may_hedge(
    stream: bool, managed: bool, pinned: bool, rest: int, hedged: bool
) -> None:
    first, second = A, B
    context = AttemptContext.start(
        "request", KEY, RoutePlan("alpha/m", "single", (first, second)), stream, pinned=pinned
    )
    context.lease = LeaseClaim("owner", 1, KEY.id, first.connection.id) if managed else None

    delay = Hedging().delay_ms(first, context, [second][:rest])

    assert (delay is not None) is hedged
