"""The ``auto`` strategy's weights and router modes: the
reference's weights summing to 1, custom weights renormalised, mode packs replacing them, and
each mode's order on one fixed set of candidates."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from routing.strategies.auto.factors import FACTOR_KEYS, AutoCandidate, Factors
from routing.strategies.auto.request import AutoMode, RequestProfile
from routing.strategies.auto.scoring import (
    DEFAULT_WEIGHTS,
    MODE_PACKS,
    LastKnownGood,
    SlaTarget,
    auto_order,
    check_weights,
    latency_key,
    lkg_index,
    mode_weights,
    normalise_weights,
    order_by_mode,
    score,
)
from tests.routing.auto_support import BETA, candidates, ids, signals, target

REQUEST = RequestProfile(input_tokens=1_000, max_output_tokens=1_000)
# One fixed pool: A healthy, slow and dear; B cheap, middling, 10 % errors; C fast with 20 %
# errors; D unknown (no request yet, no price).
A = signals(
    1,
    0,
    steps=4,
    requests=100,
    successes=99,
    mean_latency_ms=2000.0,
    p95_latency_ms=4000.0,
    input_price=10.0,
    output_price=30.0,
)
B = signals(
    2,
    1,
    steps=4,
    requests=100,
    successes=90,
    mean_latency_ms=800.0,
    p95_latency_ms=1200.0,
    input_price=0.5,
    output_price=1.5,
)
C = signals(
    3,
    2,
    steps=4,
    requests=100,
    successes=80,
    mean_latency_ms=150.0,
    p95_latency_ms=300.0,
    input_price=2.0,
    output_price=6.0,
)
D = signals(4, 3, steps=4)
POOL = candidates([A, B, C, D], REQUEST)


def test_the_default_weights_are_the_reference_s_and_sum_to_1() -> None:
    assert dict(DEFAULT_WEIGHTS) == {
        "quota": 0.1429,
        "health": 0.1605,
        "costInv": 0.1429,
        "latencyInv": 0.1143,
        "taskFit": 0.0762,
        "stability": 0.0476,
        "tierPriority": 0.0476,
        "tierAffinity": 0.0476,
        "specificityMatch": 0.0476,
        "contextAffinity": 0.0476,
        "sessionAvailability": 0.0476,
        "connectionDensity": 0.0476,
        "cacheAffinity": 0.0,
        "resetWindowAffinity": 0.0,
        "quality": 0.03,
    }
    assert math.fsum(DEFAULT_WEIGHTS.values()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("mode", sorted(MODE_PACKS))
def test_every_pack_names_the_15_factors_and_sums_to_1(mode: AutoMode) -> None:
    check_weights(MODE_PACKS[mode])
    assert tuple(MODE_PACKS[mode]) == FACTOR_KEYS


def test_check_weights_refuses_a_sum_other_than_1_and_a_missing_factor() -> None:
    with pytest.raises(ValueError, match="sum"):
        check_weights({**DEFAULT_WEIGHTS, "quality": 0.04})
    with pytest.raises(ValueError, match="exactly"):
        check_weights({k: v for k, v in DEFAULT_WEIGHTS.items() if k != "quality"})


def test_custom_weights_are_laid_over_the_defaults_and_renormalised() -> None:
    weights = normalise_weights({"costInv": 1.0, "quality": 0.0})
    assert math.fsum(weights.values()) == pytest.approx(1.0)
    total = 1.0 + 1.0 - 0.1429 - 0.03
    assert weights["costInv"] == pytest.approx(1.0 / total)
    assert weights["health"] == pytest.approx(0.1605 / total)
    assert weights["quality"] == 0.0


def test_renormalising_the_defaults_changes_nothing() -> None:
    assert normalise_weights(dict(DEFAULT_WEIGHTS)) == pytest.approx(dict(DEFAULT_WEIGHTS))


@pytest.mark.parametrize(
    "custom",
    [
        {"speed": 1.0},
        {"health": -0.1},
        {"health": math.nan},
        {"health": math.inf},
        dict.fromkeys(FACTOR_KEYS, 0.0),
    ],
)
def test_bad_custom_weights_are_refused(custom: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        normalise_weights(custom)


def test_a_pack_replaces_custom_weights_wholesale() -> None:
    custom = {"quality": 5.0}
    assert mode_weights(AutoMode.COST, custom) is MODE_PACKS[AutoMode.COST]
    assert mode_weights(AutoMode.RULES, custom) == normalise_weights(custom)
    assert mode_weights(AutoMode.SCORE) is DEFAULT_WEIGHTS
    assert MODE_PACKS[AutoMode.COST]["costInv"] == 0.5
    assert MODE_PACKS[AutoMode.LATENCY]["latencyInv"] == 0.45


def test_the_score_is_the_weighted_sum() -> None:
    cand = POOL[0]
    ones = replace(cand, factors=Factors(**dict.fromkeys(_fields(), 1.0)))
    halves = replace(cand, factors=Factors(**dict.fromkeys(_fields(), 0.5)))
    assert score(ones, DEFAULT_WEIGHTS) == pytest.approx(1.0)
    assert score(halves, DEFAULT_WEIGHTS) == pytest.approx(0.5)
    only_health = {k: 1.0 if k == "health" else 0.0 for k in FACTOR_KEYS}
    assert score(cand, only_health) == pytest.approx(cand.factors.health)


def _fields() -> list[str]:
    return list(Factors.__dataclass_fields__)


def order(mode: AutoMode, pool: tuple[AutoCandidate, ...] = POOL, **kwargs: object) -> list[int]:
    weights = mode_weights(mode)
    scores = {c.key: score(c, weights) for c in pool}
    return ids(c.target for c in order_by_mode(pool, scores, mode, **kwargs))  # type: ignore[arg-type]


def by_score(mode: AutoMode, pool: tuple[AutoCandidate, ...] = POOL) -> list[int]:
    weights = mode_weights(mode)
    return ids(c.target for c in sorted(pool, key=lambda c: -score(c, weights)))


def test_score_mode_is_the_default_weights_descending() -> None:
    """A is the healthiest, but 20 times dearer and 13 times slower than the best: the
    reference's weights rank it below a target nothing is known of."""
    assert order(AutoMode.SCORE) == by_score(AutoMode.SCORE) == [2, 3, 4, 1]


def test_rules_puts_a_target_known_unable_to_take_the_request_last() -> None:
    request = RequestProfile(input_tokens=1_000, max_output_tokens=1_000, tools=2)
    able = signals(1, 0, steps=3)
    best = signals(
        2,
        1,
        steps=3,
        requests=50,
        successes=50,
        mean_latency_ms=100.0,
        input_price=0.1,
        tool_limit=1,
    )
    other = signals(3, 2, steps=3)
    pool = candidates([able, best, other], request)
    assert pool[1].factors.task_fit == 0
    assert order(AutoMode.SCORE, pool) == [2, 1, 3]
    assert order(AutoMode.RULES, pool) == [1, 3, 2]
    assert order(AutoMode.SMART, pool) == [1, 3, 2]
    assert order(AutoMode.RULES) == order(AutoMode.SCORE)  # no misfit: the score alone


def test_cost_mode_is_the_estimated_cost_ascending_unknown_last() -> None:
    assert [c.cost_usd for c in POOL][:3] == pytest.approx([0.04, 0.002, 0.008])
    assert order(AutoMode.COST) == [2, 3, 1, 4]


def test_latency_mode_is_p95_plus_error_rate_times_1000() -> None:
    assert [latency_key(s) for s in (A, B, C, D)] == pytest.approx([4010, 1300, 500, math.inf])
    assert order(AutoMode.LATENCY) == [3, 2, 1, 4]


def test_latency_mode_falls_back_to_the_mean_latency() -> None:
    assert latency_key(replace(B, p95_latency_ms=None)) == pytest.approx(900)


def test_sla_mode_puts_the_targets_meeting_the_sla_first() -> None:
    """A meets it (p95 4 s, 1 % errors); D has no latency yet; B and C miss it on errors and
    follow by the sla pack's score (C's latency outweighs B's health)."""
    assert order(AutoMode.SLA) == [1, 4, 3, 2]
    looser_on_errors = SlaTarget(latency_ms=1000, max_error_rate=0.25)
    assert order(AutoMode.SLA, sla=looser_on_errors) == [3, 4, 1, 2]  # A: the healthier miss


def test_lkgp_mode_puts_the_last_known_good_target_first() -> None:
    assert order(AutoMode.LKGP, lkg=LastKnownGood("alpha", "1")) == [1, 2, 3, 4]
    assert order(AutoMode.LKGP, lkg=None) == order(AutoMode.SCORE)
    assert order(AutoMode.LKGP, lkg=LastKnownGood("gamma", "1")) == order(AutoMode.SCORE)


def test_the_last_known_good_match_is_exact_else_by_provider_or_model_prefix() -> None:
    targets = [target(1), target(2, provider=BETA), target(3, provider=BETA), target(4)]
    assert lkg_index(targets, LastKnownGood("beta", "3")) == 2
    assert lkg_index(targets, LastKnownGood("beta", "9")) == 1
    assert lkg_index(targets, LastKnownGood("beta")) == 1
    prefixed = [target(1), target(5, model="openai/gpt-4o")]
    assert lkg_index(prefixed, LastKnownGood("openai", "7")) == 1
    assert lkg_index(targets, LastKnownGood("gamma")) is None


@pytest.mark.parametrize("mode", list(AutoMode))
def test_every_mode_keeps_every_target_once(mode: AutoMode) -> None:
    decision = auto_order(POOL, None, mode, random.Random(3), now=0.0)
    assert sorted(ids(decision.ordered)) == [1, 2, 3, 4]
    assert decision.mode is mode
    weights = mode_weights(mode)
    assert decision.scores == {c.key: pytest.approx(score(c, weights)) for c in POOL}
