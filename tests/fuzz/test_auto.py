"""The ``auto`` strategy on arbitrary signals, headers and bodies: the headers parse or give a
400, factors and scores stay within 0..1, and the order plus the exclusions account for every
target exactly once (never leaving a request without a target)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resilience.domain.breaker.state import BreakerState
from routing.domain.client.errors import GatewayError
from routing.domain.plan.planning import Target
from routing.strategies.auto.exclusion import ExclusionRecord
from routing.strategies.auto.factors import FACTOR_KEYS, AutoSignals, build_candidates
from routing.strategies.auto.request import AutoMode, Budget, parse_auto_headers, request_profile
from routing.strategies.auto.scoring import auto_order, normalise_weights
from routing.strategies.keys import execution_key
from tests.fuzz.conftest import counted
from tests.fuzz.strategies import NOW, any_json, finite_or_odd_floats, targets

pytestmark = pytest.mark.fuzz

_HEADER_VALUES = st.one_of(
    st.sampled_from(["rules", "eco", "fast", "sla-aware", " LKGP ", "0.05", "strict", "cheapest"]),
    st.floats().map(repr),
    st.text(max_size=12),
)
AUTO_HEADERS = st.dictionaries(
    st.sampled_from(
        ["X-OmniRoute-Mode", "x-omniroute-budget", "X-OmniRoute-Budget-Fallback", "other"]
    ),
    _HEADER_VALUES,
)
_SOME_FLOAT = finite_or_odd_floats()
_COUNT = st.integers(min_value=0, max_value=10**6)


def signals_for(target: Target) -> st.SearchStrategy[AutoSignals]:
    return st.builds(
        AutoSignals,
        target=st.just(target),
        steps=st.integers(min_value=0, max_value=10),
        pinned=st.booleans(),
        requests=_COUNT,
        successes=_COUNT,
        mean_latency_ms=_SOME_FLOAT,
        p95_latency_ms=_SOME_FLOAT,
        breaker=st.sampled_from(list(BreakerState)),
        quota_used=_SOME_FLOAT,
        quota_reset_in_seconds=_SOME_FLOAT,
        input_price=_SOME_FLOAT,
        output_price=_SOME_FLOAT,
        context_window=st.one_of(st.none(), st.integers(min_value=-1, max_value=10**7)),
        tool_limit=st.one_of(st.none(), st.integers(min_value=-1, max_value=200)),
        in_flight=st.one_of(st.none(), st.integers(min_value=-1, max_value=100)),
        max_concurrent=st.one_of(st.none(), st.integers(min_value=-1, max_value=100)),
        cache_warm=st.one_of(st.none(), st.booleans()),
        quality=_SOME_FLOAT,
        exclusion=st.one_of(
            st.none(),
            st.builds(ExclusionRecord, st.floats(0, 5e9), st.integers(0, 80), _COUNT),
        ),
    )


POOL = targets(max_size=6).flatmap(lambda ts: st.tuples(*(signals_for(t) for t in ts)))
WEIGHTS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(FACTOR_KEYS), st.floats(min_value=0, max_value=10)).filter(
        lambda w: sum(w.values()) > 0
    ),
)
BUDGET = st.one_of(st.none(), st.builds(Budget, st.floats(0, 10), st.booleans()))
_PAYLOAD = st.dictionaries(
    st.sampled_from(["messages", "input", "max_tokens", "max_output_tokens", "tools", "model"]),
    any_json(),
).map(lambda payload: orjson.loads(orjson.dumps(payload)))


@given(AUTO_HEADERS)
@counted
def test_auto_headers(headers: dict[str, str]) -> None:
    try:
        options = parse_auto_headers(headers)
    except GatewayError as error:  # a malformed value is the client's error, never a crash
        assert error.status == 400
        return
    if options.budget is not None:
        assert 0 <= options.budget.max_usd < float("inf")


@given(
    POOL,
    _PAYLOAD,
    st.integers(min_value=0, max_value=300),
    WEIGHTS,
    st.sampled_from(list(AutoMode)),
    st.randoms(use_true_random=False),
    NOW,
    BUDGET,
)
@counted
def test_auto_order(
    pool: tuple[AutoSignals, ...],
    payload: dict[str, Any],
    tools: int,
    weights: dict[str, float] | None,
    mode: AutoMode,
    rng: random.Random,
    now: float,
    budget: Budget | None,
) -> None:
    candidates = build_candidates(pool, request_profile(payload, tools))
    for candidate in candidates:
        assert all(0.0 <= value <= 1.0 for value in candidate.factors.by_key().values())
    custom = normalise_weights(weights) if weights else None
    try:
        decision = auto_order(candidates, custom, mode, rng, now=now, budget=budget)
    except GatewayError as error:  # only a strict budget that nothing fits refuses
        assert error.status == 402 and budget is not None and budget.strict
        return

    given_keys = sorted(execution_key(s.target) for s in pool)
    ordered_keys = [execution_key(t) for t in decision.ordered]
    excluded_keys = [execution_key(e.target) for e in decision.excluded]
    assert len(set(ordered_keys)) == len(ordered_keys)
    assert sorted(ordered_keys + excluded_keys) == given_keys  # each target once, one side
    assert bool(decision.ordered) == bool(pool)  # never every target excluded
    assert all(0.0 <= s <= 1.0 + 1e-9 for s in decision.scores.values())
