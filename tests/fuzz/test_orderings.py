"""The simple combo strategies' orderings (the ``routing.strategies`` family modules) on
arbitrary targets and caller state: a permutation of the targets, no duplicates, the same
order for the same random source, and each strategy's own invariant."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resilience.domain.breaker.state import BreakerState
from routing.domain.plan.planning import Target
from routing.strategies.catalog import context_optimized, cost_ordered
from routing.strategies.declared import declared
from routing.strategies.draws import Deck
from routing.strategies.keys import execution_key
from routing.strategies.metrics.orders import (
    TargetMetrics,
    last_known_good,
    least_used,
    p2c,
    p2c_score,
)
from routing.strategies.round_robin import round_robin
from routing.strategies.shuffle import shuffled, strict_random
from routing.strategies.weighted import weighted
from tests.fuzz.conftest import counted
from tests.fuzz.strategies import finite_or_odd_floats, targets

pytestmark = pytest.mark.fuzz

SEED = st.integers(min_value=0, max_value=2**64)
METRICS = st.builds(
    TargetMetrics,
    success_rate=finite_or_odd_floats(),
    avg_latency_ms=finite_or_odd_floats(),
    breaker=st.sampled_from(list(BreakerState)),
    count=st.integers(min_value=0, max_value=10**6),
    age_seconds=st.one_of(st.none(), st.floats(min_value=0, max_value=1e6)),
)


def assert_permutation(ordered: Sequence[Target], given_targets: Sequence[Target]) -> None:
    assert len(ordered) == len(given_targets)
    assert sorted(map(execution_key, ordered)) == sorted(map(execution_key, given_targets))


def sort_price(value: float | None) -> float:
    """How cost-optimized ranks a price: unknown (None or NaN) last."""
    return math.inf if value is None or math.isnan(value) else value


@given(targets(), SEED, st.integers(min_value=-(10**12), max_value=10**12))
@counted
def test_unweighted_orderings(found: tuple[Target, ...], seed: int, counter: int) -> None:
    assert declared(found) == found
    rotated = round_robin(found, counter)
    assert_permutation(rotated, found)
    if found:
        assert rotated[0] == found[counter % len(found)]
    mixed = shuffled(found, random.Random(seed))
    assert_permutation(mixed, found)
    assert shuffled(found, random.Random(seed)) == mixed


@given(
    targets().flatmap(
        lambda t: st.tuples(
            st.just(t), st.lists(finite_or_odd_floats(), min_size=len(t), max_size=len(t))
        )
    ),
    SEED,
)
@counted
def test_weighted(given_pair: tuple[tuple[Target, ...], list[float | None]], seed: int) -> None:
    found, weights = given_pair
    ordered = weighted(found, weights, random.Random(seed))

    assert_permutation(ordered, found)
    assert weighted(found, weights, random.Random(seed)) == ordered
    usable = [w is not None and math.isfinite(w) and w > 0 for w in weights]
    if any(usable):  # a target that can never be drawn never comes first
        assert usable[found.index(ordered[0])]


@given(
    targets(),
    st.dictionaries(st.text(max_size=6), st.floats(allow_nan=False), max_size=4),
    st.lists(finite_or_odd_floats(), min_size=8, max_size=8),
    st.lists(
        st.one_of(st.none(), st.integers(min_value=-10, max_value=10**7)), min_size=8, max_size=8
    ),
)
@counted
def test_sorted_orderings(
    found: tuple[Target, ...],
    extra_counts: dict[str, float],
    prices: list[float | None],
    windows: list[int | None],
) -> None:
    counts = {**extra_counts, **{execution_key(t): float(t.step % 3) for t in found}}
    by_use = least_used(found, counts)
    price = {t: prices[i] for i, t in enumerate(found)}
    by_cost = cost_ordered(found, price.__getitem__)
    window = {t: windows[i] for i, t in enumerate(found)}
    by_window = context_optimized(found, window.__getitem__)

    for ordered in (by_use, by_cost, by_window):
        assert_permutation(ordered, found)
    uses = [counts[execution_key(t)] for t in by_use]
    assert uses == sorted(uses)
    costs = [sort_price(price[t]) for t in by_cost]
    assert costs == sorted(costs)
    if any(w is not None for w in windows[: len(found)]):
        sizes = [window[t] or 0 for t in by_window]
        assert sizes == sorted(sizes, reverse=True)
    else:
        assert by_window == found


@given(targets(), SEED, st.lists(METRICS, min_size=8, max_size=8))
@counted
def test_p2c(found: tuple[Target, ...], seed: int, metrics: list[TargetMetrics]) -> None:
    known = {execution_key(t): metrics[i] for i, t in enumerate(found)}
    ordered = p2c(found, random.Random(seed), known)

    assert_permutation(ordered, found)
    assert p2c(found, random.Random(seed), known) == ordered
    # after the two picks' winner, the others by descending score; an OPEN breaker leads only
    # when both random picks were OPEN
    scores = [p2c_score(known[execution_key(t)]) for t in ordered[1:]]
    assert scores == sorted(scores, reverse=True)
    opened = [m for m in known.values() if m.breaker == BreakerState.OPEN]
    if ordered and known[execution_key(ordered[0])].breaker == BreakerState.OPEN:
        assert len(opened) >= 2 or len(found) == 1


@given(targets(), SEED)
@counted
def test_strict_random(found: tuple[Target, ...], seed: int) -> None:
    deck, rng = Deck(), random.Random(seed)
    rounds = [strict_random(found, deck, rng) for _ in range(len(found))]

    for ordered in rounds:
        assert_permutation(ordered, found)
    # over N requests on N distinct keys, every target comes first exactly once
    assert sorted(execution_key(r[0]) for r in rounds) == sorted(map(execution_key, found))


@given(
    targets(),
    st.one_of(st.none(), st.sampled_from(["alpha", "beta", "gamma", "delta"])),
    st.one_of(st.none(), st.integers(min_value=0, max_value=13)),
)
@counted
def test_last_known_good(found: tuple[Target, ...], provider: str | None, cid: int | None) -> None:
    ordered = last_known_good(found, provider, cid)

    assert_permutation(ordered, found)
    matches = [t for t in found if provider is not None and t.provider.slug == provider]
    if matches:
        assert ordered[0].provider.slug == provider
        exact = [t for t in matches if t.connection.id == cid]
        assert ordered[0] == (exact or matches)[0]
    else:
        assert ordered == found
