"""``auto_order``: exploration at its rate and never in incident
mode, exclusions of poor targets that never leave a request without one, open breakers, and
the client's budget with its strict 402."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from resilience.domain.breaker.state import BreakerState
from routing.domain.client.errors import GatewayError
from routing.strategies.auto.exclusion import ExclusionPolicy, ExclusionRecord
from routing.strategies.auto.factors import AutoSignals
from routing.strategies.auto.request import AutoMode, Budget, RequestProfile
from routing.strategies.auto.scoring import (
    CIRCUIT_OPEN,
    LOW_SCORE,
    OVER_BUDGET,
    AutoDecision,
    auto_order,
    explore,
    incident_mode,
)
from tests.routing.auto_support import Fixed, Scripted, candidates, ids, signals, target

NOW = 1_700_000_000.0
POLICY = ExclusionPolicy(base_seconds=30, max_seconds=30)  # capped at the default transient cap
REQUEST = RequestProfile(input_tokens=1_000, max_output_tokens=1_000)  # 2 000 tokens
DRAWS = 10_000


def healthy(cid: int, **raw: Any) -> AutoSignals:
    """A target that always answered, in 0.5 s, at $1 per million tokens (by default)."""
    raw = {"input_price": 1.0, "mean_latency_ms": 500.0, **raw}
    return signals(cid, cid - 1, steps=5, requests=20, successes=20, **raw)


def poor(cid: int, **raw: Any) -> AutoSignals:
    """A target that scores far below 0.2: failing, half-open, out of quota, too small, busy."""
    return signals(
        cid,
        4,
        steps=5,
        requests=50,
        successes=0,
        breaker=BreakerState.HALF_OPEN,
        quota_used=1.0,
        context_window=100,
        in_flight=2,
        max_concurrent=2,
        cache_warm=False,
        quality=0.0,
        model="poor",
        input_price=100.0,
        mean_latency_ms=60_000.0,
        **raw,
    )


FOUR = candidates([healthy(1), healthy(2), healthy(3), healthy(4)], REQUEST)


def order(
    pool: list[AutoSignals], mode: AutoMode = AutoMode.SCORE, *, budget: Budget | None = None
) -> AutoDecision:
    """The decision at NOW with the capped policy, never exploring."""
    pool_ = candidates(pool, REQUEST)
    return auto_order(pool_, None, mode, Fixed(), now=NOW, policy=POLICY, budget=budget)


@pytest.mark.parametrize(("mode", "rate"), [(AutoMode.RULES, 0.05), (AutoMode.SMART, 0.10)])
def test_exploration_happens_at_its_rate(mode: AutoMode, rate: float) -> None:
    rng = random.Random(20240611)
    base = auto_order(FOUR, None, mode, Scripted([1.0]), now=NOW).ordered
    firsts: Counter[int] = Counter()
    explored = 0
    for _ in range(DRAWS):
        decision = auto_order(FOUR, None, mode, rng, now=NOW)
        explored += decision.explored
        if decision.explored:
            firsts[decision.ordered[0].connection.id] += 1
            assert decision.ordered[1:] == tuple(t for t in base if t != decision.ordered[0])
        else:
            assert decision.ordered == base
    assert abs(explored / DRAWS - rate) < 4 * (rate * (1 - rate) / DRAWS) ** 0.5  # 4 sigma
    assert set(firsts) == set(ids(base[1:]))  # any target but the first comes forward
    assert min(firsts.values()) > explored / 3 * 0.6  # uniformly, roughly


def test_explore_draws_once_to_decide_and_once_to_pick() -> None:
    targets = [target(i) for i in (1, 2, 3, 4)]
    assert explore(targets, Scripted([0.05]), 0.05) == (tuple(targets), False)
    assert explore(targets, Scripted([0.0499, 0.0]), 0.05) == (
        (targets[1], targets[0], targets[2], targets[3]),
        True,
    )
    assert explore(targets, Scripted([0.0, 0.9999]), 0.05)[0][0] == targets[3]
    one = Scripted([])
    assert explore(targets[:1], one, 1.0) == ((targets[0],), False)
    assert one.calls == 0


def test_incident_mode_is_more_than_half_the_breakers_open() -> None:
    def pool(opened: int, total: int) -> list[AutoSignals]:
        return [
            healthy(i, breaker=BreakerState.OPEN if i <= opened else BreakerState.CLOSED)
            for i in range(1, total + 1)
        ]

    assert incident_mode(candidates(pool(3, 5)))
    assert not incident_mode(candidates(pool(2, 4)))
    assert not incident_mode(candidates([]))


def test_no_exploration_in_incident_mode() -> None:
    opened = [healthy(i, breaker=BreakerState.OPEN) for i in (1, 2, 3)]
    pool = candidates([*opened, healthy(4), healthy(5)], REQUEST)
    rng = random.Random(7)
    decisions = [auto_order(pool, None, AutoMode.SMART, rng, now=NOW) for _ in range(DRAWS)]
    assert all(d.incident and not d.explored for d in decisions)
    untouched = Scripted([])  # and no draw at all
    assert auto_order(pool, None, AutoMode.SMART, untouched, now=NOW).ordered
    assert untouched.calls == 0


def test_an_open_breaker_excludes_unless_every_target_is_open() -> None:
    decision = order([healthy(1, breaker=BreakerState.OPEN), healthy(2)])
    assert ids(decision.ordered) == [2]
    assert [(e.target.connection.id, e.reason) for e in decision.excluded] == [(1, CIRCUIT_OPEN)]
    every = order([healthy(i, breaker=BreakerState.OPEN) for i in (1, 2)])
    assert ids(every.ordered) == [1, 2] and every.excluded == ()


def test_a_poor_target_is_excluded_and_its_record_returned() -> None:
    decision = order([healthy(1), poor(2)])
    assert decision.scores["2:poor"] < 0.2 <= decision.scores["1:m"]
    assert ids(decision.ordered) == [1]
    assert [(e.reason, e.until) for e in decision.excluded] == [(LOW_SCORE, NOW + 30)]
    assert decision.records == {"2:poor": ExclusionRecord(NOW + 30, 0, 50)}


def test_the_last_candidate_is_never_excluded() -> None:
    decision = order([poor(1), poor(2)])
    assert ids(decision.ordered) == [1, 2]
    assert decision.excluded == () and decision.records == {}


def test_a_running_exclusion_keeps_the_target_out_without_a_new_record() -> None:
    record = ExclusionRecord(NOW + 10, 1, 3)
    decision = order([healthy(1), healthy(2, exclusion=record)])
    assert ids(decision.ordered) == [1]
    assert [(e.reason, e.until) for e in decision.excluded] == [(LOW_SCORE, NOW + 10)]
    assert decision.records == {}


def test_when_every_target_is_excluded_none_is() -> None:
    running = ExclusionRecord(NOW + 10, 0, 3)
    decision = order([healthy(1, exclusion=running), healthy(2, exclusion=running)])
    assert ids(decision.ordered) == [1, 2] and decision.excluded == ()


def test_an_expired_exclusion_of_a_target_that_scores_well_again_is_cleared() -> None:
    expired = ExclusionRecord(NOW - 1, 2, 3)
    decision = order([healthy(1), healthy(2, exclusion=expired)])
    assert ids(decision.ordered) == [1, 2]
    assert decision.records == {"2:m": None}


def test_an_expired_exclusion_without_a_probe_keeps_the_target_in_last() -> None:
    expired = ExclusionRecord(NOW - 1, 0, 50)  # it served 50 requests then, and still has
    decision = order([healthy(1), poor(2, exclusion=expired)])
    assert ids(decision.ordered) == [1, 2]
    assert decision.records == {} and decision.excluded == ()


def test_a_failed_probe_excludes_again_at_the_next_level() -> None:
    expired = ExclusionRecord(NOW - 1, 0, 49)  # one more request since: the probe failed
    policy = ExclusionPolicy(base_seconds=30, max_seconds=120)
    decision = auto_order(
        candidates([healthy(1), poor(2, exclusion=expired)], REQUEST),
        None,
        AutoMode.SCORE,
        Fixed(),
        now=NOW,
        policy=policy,
    )
    assert decision.records == {"2:poor": ExclusionRecord(NOW + 60, 1, 50)}


PRICED = [
    healthy(1, input_price=1.0),  # $0.002 for this request
    healthy(2, input_price=5.0),  # $0.010
    healthy(3, input_price=None),  # unknown price
]


def test_targets_above_the_budget_drop_out() -> None:
    decision = order(PRICED, budget=Budget(0.005))
    assert ids(decision.ordered) == [1, 3]  # an unknown price stays
    assert [(e.target.connection.id, e.reason) for e in decision.excluded] == [(2, OVER_BUDGET)]


def test_a_strict_budget_also_drops_unknown_prices() -> None:
    decision = order(PRICED, budget=Budget(0.005, strict=True))
    assert ids(decision.ordered) == [1]


def test_above_every_budget_the_cheapest_comes_first_whatever_the_mode() -> None:
    pool = [healthy(1, input_price=5.0, mean_latency_ms=10.0), healthy(2, input_price=1.0)]
    decision = order(pool, AutoMode.LATENCY, budget=Budget(0.0001))
    assert ids(decision.ordered) == [2, 1] and decision.excluded == ()


def test_above_a_strict_budget_the_request_is_refused_with_402() -> None:
    with pytest.raises(GatewayError) as raised:
        order(PRICED[:2], budget=Budget(0.001, strict=True))
    assert (raised.value.status, raised.value.code) == (402, "budget_exceeded")
    assert raised.value.extra["diagnostics"]["cheapestUsd"] == pytest.approx(0.002)


def test_a_strict_budget_with_only_unknown_prices_is_refused() -> None:
    with pytest.raises(GatewayError) as raised:
        order(
            [healthy(1, input_price=None), healthy(2, input_price=None)],
            budget=Budget(1.0, strict=True),
        )
    assert raised.value.extra["diagnostics"]["cheapestUsd"] is None


def test_the_budget_is_checked_before_open_breakers() -> None:
    """A target within the budget whose breaker is open stays the one candidate: the breaker
    filter explains it (503), rather than a 402 for a budget the client did set right."""
    pool = [healthy(1, input_price=1.0, breaker=BreakerState.OPEN), healthy(2, input_price=5.0)]
    decision = order(pool, budget=Budget(0.005, strict=True))
    assert ids(decision.ordered) == [1]
