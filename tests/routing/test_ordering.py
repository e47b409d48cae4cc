"""The pure orderings of the simple combo strategies: declared, random,
weighted, round-robin, least-used, cost-optimized, p2c, strict-random, lkgp and
context-optimized."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import pytest

from resilience.domain.breaker.state import BreakerState
from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target
from routing.strategies.catalog import context_optimized, cost_ordered
from routing.strategies.declared import declared
from routing.strategies.draws import Deck
from routing.strategies.keys import execution_key
from routing.strategies.metrics.orders import (
    P2C_TIE_BAND,
    TargetMetrics,
    last_known_good,
    least_used,
    p2c,
    p2c_comparable,
    p2c_score,
)
from routing.strategies.round_robin import round_robin
from routing.strategies.shuffle import shuffled, strict_random
from routing.strategies.weighted import weighted

PROVIDER = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)


def target(connection_id: int, model: str = "m", step: int = 0) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider="alpha",
        name=f"alpha-{connection_id}",
        priority=connection_id,
        base_url="https://alpha.test/v1",
        auth_type="api_key",
        secret=f"secret-{connection_id}",
    )
    return Target(PROVIDER, connection, model, step)


A, B, C, D, E = (target(i, step=i - 1) for i in range(1, 6))
FIVE = (A, B, C, D, E)


class Scripted:
    """An rng whose ``random()`` returns the given values in turn."""

    def __init__(self, values: Iterable[float]) -> None:
        self._values = iter(values)

    def random(self) -> float:
        return next(self._values)


def ids(targets: Sequence[Target]) -> list[int]:
    return [t.connection.id for t in targets]


ORDERINGS: dict[str, Callable[[list[Target]], tuple[Target, ...]]] = {
    "declared": declared,
    "shuffled": lambda ts: shuffled(ts, random.Random(7)),
    "weighted": lambda ts: weighted(ts, [1, 0, None, 3, 2.5][: len(ts)], random.Random(7)),
    "round_robin": lambda ts: round_robin(ts, 3),
    "least_used": lambda ts: least_used(ts, {"2:m": 5, "4:m": 1}),
    "cost_ordered": lambda ts: cost_ordered(ts, lambda t: [3.0, None, 1.0, 3.0, 0.5][t.step]),
    "p2c": lambda ts: p2c(ts, random.Random(7), {"1:m": TargetMetrics(90, 200)}),
    "strict_random": lambda ts: strict_random(ts, Deck(), random.Random(7)),
    "last_known_good": lambda ts: last_known_good(ts, "alpha", 4),
    "context_optimized": lambda ts: context_optimized(ts, lambda t: [None, 8, 0, 32, 8][t.step]),
}


@pytest.mark.parametrize("name", sorted(ORDERINGS))
@pytest.mark.parametrize("size", [0, 1, 2, 5])
def test_every_ordering_is_a_permutation_and_leaves_its_input_alone(name: str, size: int) -> None:
    targets = list(FIVE[:size])
    result = ORDERINGS[name](targets)
    assert isinstance(result, tuple)
    assert Counter(map(id, result)) == Counter(map(id, FIVE[:size]))
    assert targets == list(FIVE[:size])


def test_declared_keeps_the_declared_order() -> None:
    assert declared([C, A, B]) == (C, A, B)


def test_shuffled_is_fisher_yates_over_a_seeded_rng() -> None:
    # Precomputed from the documented algorithm with random.Random(42).
    assert ids(shuffled(FIVE, random.Random(42))) == [2, 3, 5, 1, 4]
    assert shuffled(FIVE, random.Random(42)) == shuffled(FIVE, random.Random(42))


def test_shuffled_reaches_every_order() -> None:
    orders = {tuple(ids(shuffled((A, B, C), random.Random(seed)))) for seed in range(300)}
    assert len(orders) == 6


def test_weighted_draws_in_proportion_to_the_weights() -> None:
    rng = random.Random(0)
    firsts = Counter(weighted((A, B, C), [1, 1, 2], rng)[0].connection.id for _ in range(4000))
    for connection_id, expected in ((1, 1000), (2, 1000), (3, 2000)):
        assert abs(firsts[connection_id] - expected) <= 0.05 * expected
    # Evenly spaced draws split exactly in proportion.
    grid = Scripted(k / 4000 for k in range(4000))
    exact = Counter(weighted((A, B, C), [1, 1, 2], grid)[0].connection.id for _ in range(4000))
    assert exact == {1: 1000, 2: 1000, 3: 2000}


@pytest.mark.parametrize("bad", [0, None, -1.0, math.inf, math.nan])
def test_weighted_never_draws_an_unusable_weight_while_one_is_positive(bad: float | None) -> None:
    rng = random.Random(5)
    firsts = {weighted((A, B, C), [bad, 1, bad], rng)[0] for _ in range(500)}
    assert firsts == {B}


def test_weighted_with_no_positive_weight_draws_uniformly() -> None:
    rng = random.Random(99)
    firsts = Counter(weighted((A, B, C), [0, None, 0], rng)[0].connection.id for _ in range(3000))
    assert set(firsts) == {1, 2, 3}
    assert all(abs(n - 1000) <= 100 for n in firsts.values())


def test_weighted_puts_the_rest_by_descending_weight_with_declared_ties() -> None:
    weights = [1, 3, 2, 0, 3]  # cumulative 1, 4, 6, 6, 9
    assert ids(weighted(FIVE, weights, Scripted([0.0]))) == [1, 2, 5, 3, 4]
    assert ids(weighted(FIVE, weights, Scripted([5.5 / 9]))) == [3, 2, 5, 1, 4]
    assert ids(weighted(FIVE, weights, Scripted([0.999999]))) == [5, 2, 3, 1, 4]


def test_weighted_scales_weights_whose_sum_would_overflow() -> None:
    # math.fsum raised "intermediate overflow" on two weights near the float maximum
    firsts = {weighted((A, B, C), [1.7e308, 1.7e308, 1.0], Scripted([x]))[0] for x in (0.2, 0.7)}

    assert firsts == {A, B}


def test_weighted_rejects_misaligned_weights() -> None:
    with pytest.raises(ValueError):
        weighted((A, B), [1], random.Random(0))


def test_round_robin_rotates_by_the_counter() -> None:
    rotations = [ids(round_robin((A, B, C), counter)) for counter in range(5)]
    assert rotations == [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3], [2, 3, 1]]
    assert round_robin((), 3) == ()


def test_least_used_ascends_by_count_with_unknown_as_zero_and_stable_ties() -> None:
    counts = {"1:m": 4, "2:m": 1, "3:m": 0, "5:m": 1}  # D (4:m) unknown = 0
    assert ids(least_used(FIVE, counts)) == [3, 4, 2, 5, 1]
    assert least_used(FIVE, {}) == FIVE
    keyed = least_used((target(1, "x"), target(1, "y")), {"1:x": 2})
    assert [execution_key(t) for t in keyed] == ["1:y", "1:x"]


def test_cost_ordered_ascends_with_unknown_last_and_stable_ties() -> None:
    prices = {1: 2.0, 2: None, 3: 0.5, 4: 2.0, 5: None}
    assert ids(cost_ordered(FIVE, lambda t: prices[t.connection.id])) == [3, 1, 4, 2, 5]
    assert ids(cost_ordered(FIVE, lambda t: math.nan if t is A else 1.0)) == [2, 3, 4, 5, 1]


def test_p2c_score_follows_the_formula() -> None:
    assert p2c_score(TargetMetrics(90, 200)) == pytest.approx(0.9 + 1 / math.log10(210))
    assert p2c_score(TargetMetrics(None, None)) == pytest.approx(0.5 + 0.25)
    assert p2c_score(TargetMetrics(100, 0)) == pytest.approx(1.0 + 0.25)
    assert p2c_score(None) == pytest.approx(0.75)
    half_open = TargetMetrics(80, 990, BreakerState.HALF_OPEN)
    assert p2c_score(half_open) == pytest.approx(0.8 + 1 / math.log10(1000) - 0.25)
    assert p2c_score(TargetMetrics(100, 1, "open")) == -math.inf


def test_p2c_puts_the_better_pick_first_then_the_rest_by_score() -> None:
    # First pick index 3 (D), second pick index int(0.3 * 4) = 1 (B) of the others.
    metrics = {"2:m": TargetMetrics(99, 50), "4:m": TargetMetrics(60, 3000)}
    assert ids(p2c(FIVE, Scripted([0.7, 0.3]), metrics)) == [2, 4, 1, 3, 5]
    # Second pick int(0.8 * 4) = 3 of the others (A, B, C, E): E, never measured, so a tie that
    # the first pick keeps; the rest by score: B (measured, healthy) before the unknown ones.
    assert p2c_score(metrics["4:m"]) > 0.75
    assert ids(p2c(FIVE, Scripted([0.7, 0.8]), metrics)) == [4, 2, 5, 1, 3]


def test_p2c_never_fails_over_to_a_known_bad_target_before_a_healthy_one() -> None:
    bad, good = TargetMetrics(30, 500, count=10), TargetMetrics(99, 500, count=100)
    metrics = {"1:m": bad, "2:m": good, "3:m": good}
    for seed in range(50):
        order = ids(p2c((A, B, C), random.Random(seed), metrics))
        assert order[-1] == 1, order


def test_p2c_never_puts_an_open_breaker_first_and_penalises_half_open() -> None:
    open_b = {"1:m": TargetMetrics(100, 1, BreakerState.OPEN), "2:m": TargetMetrics(0, 1e9)}
    rng = random.Random(3)
    assert all(p2c((A, B), rng, open_b)[0] is B for _ in range(50))
    # Equal metrics but B half-open: the 0.25 penalty puts A first whichever is picked first.
    half = {"1:m": TargetMetrics(90, 100), "2:m": TargetMetrics(90, 100, BreakerState.HALF_OPEN)}
    assert p2c((A, B), Scripted([0.9, 0.0]), half)[0] is A
    assert p2c((A, B), Scripted([0.0, 0.0]), half)[0] is A


def test_p2c_tie_keeps_the_first_pick_first() -> None:
    same = {"1:m": TargetMetrics(80, 100), "3:m": TargetMetrics(80, 100)}
    assert ids(p2c((A, B, C), Scripted([0.9, 0.0]), same)) == [3, 1, 2]
    assert ids(p2c((A, B, C), Scripted([0.0, 0.9]), same)) == [1, 3, 2]


def test_p2c_with_one_target_draws_nothing() -> None:
    assert p2c((A,), Scripted([]), {}) == (A,)
    assert p2c((), Scripted([]), {}) == ()


def test_strict_random_deals_every_target_first_once_per_deck_then_refills() -> None:
    deck, rng = Deck(), random.Random(11)
    for _ in range(3):
        firsts = [strict_random(FIVE, deck, rng)[0] for _ in range(5)]
        assert sorted(ids(firsts)) == [1, 2, 3, 4, 5]
        assert deck.remaining == ()


def test_strict_random_shuffles_the_remainder() -> None:
    rests = set()
    for seed in range(100):
        order = strict_random((A, B, C, D), Deck(), random.Random(seed))
        rests.add(tuple(ids(order[1:])))
    assert len(rests) > 6  # not just declared order minus the drawn one (4 such tails)


def test_strict_random_resets_the_deck_when_the_target_set_changes() -> None:
    deck, rng = Deck(), random.Random(8)
    first = strict_random((A, B, C), deck, rng)[0]
    assert len(deck.remaining) == 2
    dropped = next(t for t in (A, B, C) if t is not first)  # still in the old deck
    swapped = (*(t for t in (A, B, C) if t is not dropped), D)
    firsts = [strict_random(swapped, deck, rng)[0] for _ in range(3)]
    assert sorted(ids(firsts)) == sorted(ids(swapped))
    assert deck.remaining == ()


def test_strict_random_with_no_targets_leaves_the_deck_alone() -> None:
    deck = Deck()
    strict_random((A, B), deck, random.Random(0))
    before = deck.remaining
    assert strict_random((), deck, Scripted([])) == ()
    assert deck.remaining == before


BETA = ProviderInfo("beta", "Beta", "api_key", "https://beta.test/v1", WireFormat.OPENAI)


def beta(connection_id: int, model: str = "m") -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider="beta",
        name=f"beta-{connection_id}",
        priority=connection_id,
        base_url="https://beta.test/v1",
        auth_type="api_key",
    )
    return Target(BETA, connection, model)


B2, B3 = beta(2), beta(3)
MIXED_PROVIDERS = (A, B2, B3, D)  # alpha-1, beta-2, beta-3, alpha-4


def labels(targets: Sequence[Target]) -> list[str]:
    return [f"{t.provider.slug}-{t.connection.id}" for t in targets]


@pytest.mark.parametrize(
    ("provider", "connection_id", "first"),
    [
        ("beta", 3, "beta-3"),  # provider and connection: that very target
        ("beta", 99, "beta-2"),  # the connection is gone: the provider's first target
        ("beta", None, "beta-2"),
        ("beta", 1, "beta-2"),  # connection 1 is alpha's: only the provider matches
        ("alpha", 4, "alpha-4"),
    ],
)
def test_last_known_good_moves_the_best_match_to_the_front(
    provider: str, connection_id: int | None, first: str
) -> None:
    ordered = last_known_good(MIXED_PROVIDERS, provider, connection_id)
    rest = [label for label in labels(MIXED_PROVIDERS) if label != first]
    assert labels(ordered) == [first, *rest]


def test_last_known_good_matches_a_model_named_after_the_provider() -> None:
    routed = target(9, model="gamma/large")
    assert last_known_good((A, B2, routed), "gamma", 5) == (routed, A, B2)


@pytest.mark.parametrize(("provider", "connection_id"), [("delta", 1), (None, 3), (None, None)])
def test_last_known_good_without_a_match_keeps_the_order(
    provider: str | None, connection_id: int | None
) -> None:
    assert last_known_good(MIXED_PROVIDERS, provider, connection_id) == MIXED_PROVIDERS


def test_context_optimized_descends_by_window_with_unknown_as_zero_and_stable_ties() -> None:
    windows = {1: 128_000, 2: None, 3: 200_000, 4: 128_000, 5: 8_000}
    assert ids(context_optimized(FIVE, lambda t: windows[t.connection.id])) == [3, 1, 4, 5, 2]
    zero_first = {1: None, 2: 0, 3: 1_000}
    assert ids(context_optimized((A, B, C), lambda t: zero_first[t.connection.id])) == [3, 1, 2]


def test_context_optimized_with_no_known_window_keeps_the_order() -> None:
    assert context_optimized((C, A, B), lambda t: None) == (C, A, B)


def test_p2c_comparable_scores_go_to_the_less_used_pick() -> None:
    busy, idle = TargetMetrics(100, 200, count=9), TargetMetrics(100, 230, count=3)
    assert abs(p2c_score(busy) - p2c_score(idle)) <= P2C_TIE_BAND
    metrics = {"1:m": busy, "2:m": idle}
    assert ids(p2c((A, B), Scripted([0.0, 0.0]), metrics)) == [2, 1]
    assert ids(p2c((A, B), Scripted([0.9, 0.0]), metrics)) == [2, 1]


def test_p2c_a_clearly_better_score_wins_however_used() -> None:
    metrics = {"1:m": TargetMetrics(100, 200, count=50), "2:m": TargetMetrics(60, 200, count=0)}
    assert ids(p2c((A, B), Scripted([0.9, 0.0]), metrics)) == [1, 2]


@pytest.mark.parametrize("seed", range(5))
def test_p2c_over_healthy_targets_never_drifts_more_than_one_apart(seed: int) -> None:
    counts = {execution_key(t): 0 for t in FIVE}
    rng = random.Random(seed)
    for _ in range(1000):
        metrics = {key: TargetMetrics(100, 150 + n % 7, count=n) for key, n in counts.items()}
        counts[execution_key(p2c(FIVE, rng, metrics)[0])] += 1
        assert max(counts.values()) - min(counts.values()) <= 1


def test_p2c_second_pick_is_among_the_least_used_others() -> None:
    metrics = {
        "1:m": TargetMetrics(None, None, count=4),
        "2:m": TargetMetrics(None, None, count=2),
        "3:m": TargetMetrics(None, None, count=9),
    }
    # first pick C (index 2), second among A and B: only B has the fewest requests
    assert ids(p2c((A, B, C), Scripted([0.9, 0.99]), metrics))[:2] == [2, 3]


@pytest.mark.parametrize(
    ("a", "b", "tie"),
    [
        (TargetMetrics(100, 2), TargetMetrics(100, 9), True),  # a few ms apart: noise
        (TargetMetrics(100, 4_000), TargetMetrics(99, 5_600), True),  # within 50 %, 1 point
        (TargetMetrics(100, 900), TargetMetrics(100, 2_700), False),  # 3x slower
        (TargetMetrics(100, 40), TargetMetrics(100, 130), True),  # 90 ms apart: noise
        (TargetMetrics(100, 40), TargetMetrics(100, 200), False),  # 5x slower, 160 ms apart
        (TargetMetrics(100, 2_000), TargetMetrics(100, 2_900), True),  # within 50 %
        (TargetMetrics(100, 100), TargetMetrics(90, 100), False),  # 10 points less success
        (TargetMetrics(100, 5), TargetMetrics(100, 5, "half_open"), False),
        (TargetMetrics(None, None), TargetMetrics(None, None), True),
        (TargetMetrics(100, 5, count=3), None, True),  # never tried: its turn by count
        (TargetMetrics(100, 5, count=9), TargetMetrics(100, 900, count=2), True),  # 2: too few
        (TargetMetrics(100, 5, count=9), TargetMetrics(100, 1_900, count=5), False),
        (TargetMetrics(100, 5, count=9), TargetMetrics(100, 1_900, count=5, age_seconds=61), True),
        (TargetMetrics(100, 5, count=9), TargetMetrics(100, 1_900, count=5, age_seconds=59), False),
        (TargetMetrics(100, 5, "open", count=3), None, False),
    ],
)
def test_p2c_comparable(a: TargetMetrics, b: TargetMetrics, tie: bool) -> None:
    assert p2c_comparable(a, b) is tie
    assert p2c_comparable(b, a) is tie
