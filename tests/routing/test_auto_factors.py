"""The ``auto`` strategy's 15 factors, each from its raw inputs:
every factor in 0..1, neutral when unknown, and relative to the pool where it says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from resilience.domain.breaker.state import BreakerState
from routing.strategies.auto.factors import (
    FACTOR_KEYS,
    UNKNOWN,
    Factors,
    context_affinity_factor,
    health_factor,
    quota_factor,
    request_weight,
    reset_window_factor,
    session_availability_factor,
    stability_factor,
    task_fit_factor,
    tier_priority_factor,
)
from routing.strategies.auto.request import RequestProfile
from tests.routing.auto_support import BETA, candidates, signals


def factors_of(
    *pool_args: Mapping[str, Any], request: RequestProfile | None = None
) -> list[Factors]:
    pool = [signals(i + 1, **args) for i, args in enumerate(pool_args)]
    return [c.factors for c in candidates(pool, request)]


def test_the_fifteen_factors_are_named_as_the_weights() -> None:
    assert FACTOR_KEYS == (
        "quota",
        "health",
        "costInv",
        "latencyInv",
        "taskFit",
        "stability",
        "tierPriority",
        "tierAffinity",
        "specificityMatch",
        "contextAffinity",
        "sessionAvailability",
        "connectionDensity",
        "cacheAffinity",
        "resetWindowAffinity",
        "quality",
    )


@pytest.mark.parametrize(
    ("used", "expected"), [(None, UNKNOWN), (0.0, 1.0), (0.25, 0.75), (1.0, 0.0), (1.4, 0.0)]
)
def test_quota_is_the_share_left(used: float | None, expected: float) -> None:
    assert quota_factor(used) == pytest.approx(expected)
    assert factors_of({"quota_used": used})[0].quota == pytest.approx(expected)


@pytest.mark.parametrize(
    ("requests", "ok", "breaker", "expected"),
    [
        (0, 0, BreakerState.CLOSED, 0.5),  # no data: neutral
        (1, 0, BreakerState.CLOSED, 1 / 3),  # one failure does not sink it
        (8, 8, BreakerState.CLOSED, 0.9),
        (98, 49, BreakerState.CLOSED, 0.5),
        (8, 8, BreakerState.HALF_OPEN, 0.45),  # halved
        (8, 8, BreakerState.DEGRADED, 0.9),
        (8, 8, BreakerState.OPEN, 0.0),
    ],
)
def test_health_is_the_smoothed_success_rate(
    requests: int, ok: int, breaker: str, expected: float
) -> None:
    assert health_factor(requests, ok, breaker) == pytest.approx(expected)
    found = factors_of({"requests": requests, "successes": ok, "breaker": breaker})
    assert found[0].health == pytest.approx(expected)


def test_cost_inv_is_the_cheapest_over_each_and_neutral_when_unknown() -> None:
    request = RequestProfile(input_tokens=1_000_000, max_output_tokens=1_000_000)
    cheap, dear, unknown = factors_of(
        {"input_price": 1.0, "output_price": 1.0},  # $2 for this request
        {"input_price": 3.0, "output_price": 5.0},  # $8
        {},
        request=request,
    )
    assert cheap.cost_inv == pytest.approx(1.0)
    assert dear.cost_inv == pytest.approx(0.25, rel=1e-5)
    assert unknown.cost_inv == UNKNOWN


def test_a_free_model_is_the_cheapest_and_the_others_stay_finite() -> None:
    free, paid = factors_of({"input_price": 0.0}, {"input_price": 1.0})
    assert free.cost_inv == 1.0
    assert 0 < paid.cost_inv < 0.01


def test_latency_inv_is_the_fastest_mean_over_each() -> None:
    fast, slow, unknown = factors_of({"mean_latency_ms": 200.0}, {"mean_latency_ms": 800.0}, {})
    assert fast.latency_inv == 1.0
    assert slow.latency_inv == pytest.approx(201 / 801)
    assert unknown.latency_inv == UNKNOWN


@pytest.mark.parametrize(
    ("request_", "window", "tool_limit", "expected"),
    [
        (RequestProfile(1000, 1000), None, None, 1.0),
        (RequestProfile(1000, 1000), 2000, None, 1.0),
        (RequestProfile(1000, 1001), 2000, None, 0.0),  # does not fit the window
        (RequestProfile(10, 10, tools=5), None, 5, 1.0),
        (RequestProfile(10, 10, tools=6), None, 5, 0.0),  # more tools than it takes
    ],
)
def test_task_fit_is_zero_only_for_a_known_misfit(
    request_: RequestProfile, window: int | None, tool_limit: int | None, expected: float
) -> None:
    assert task_fit_factor(request_, window, tool_limit) == expected
    found = factors_of({"context_window": window, "tool_limit": tool_limit}, request=request_)
    assert found[0].task_fit == expected


@pytest.mark.parametrize(
    ("breaker", "mean", "p95", "expected"),
    [
        (BreakerState.CLOSED, None, None, 1.0),
        (BreakerState.CLOSED, 500.0, 1000.0, 1.0),  # an ordinary tail
        (BreakerState.CLOSED, 500.0, 2000.0, 0.5),  # a long one
        (BreakerState.CLOSED, 500.0, 400.0, 1.0),
        (BreakerState.DEGRADED, None, None, 0.5),
        (BreakerState.HALF_OPEN, 500.0, 4000.0, 0.0625),
        (BreakerState.OPEN, None, None, 0.0),
    ],
)
def test_stability_is_the_breaker_state_times_the_latency_steadiness(
    breaker: str, mean: float | None, p95: float | None, expected: float
) -> None:
    assert stability_factor(breaker, mean, p95) == pytest.approx(expected)
    raw = {"breaker": breaker, "mean_latency_ms": mean, "p95_latency_ms": p95}
    assert factors_of(raw)[0].stability == pytest.approx(expected)


def test_tier_priority_falls_with_the_declared_step() -> None:
    found = factors_of(*({"step": s, "steps": 5} for s in range(5)))
    assert [f.tier_priority for f in found] == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert tier_priority_factor(0, 1) == 1.0


def test_tier_affinity_sends_light_requests_to_cheap_models_and_heavy_ones_to_dear_ones() -> None:
    prices: list[dict[str, Any]] = [
        {"input_price": 0.1},
        {"input_price": 1.0},
        {"input_price": 10.0},
        {},
    ]
    light = factors_of(*prices, request=RequestProfile(input_tokens=0, max_output_tokens=1))
    heavy = factors_of(*prices, request=RequestProfile(input_tokens=64_000, max_output_tokens=1))
    assert [f.tier_affinity for f in light] == [1.0, 0.5, 0.0, UNKNOWN]
    assert [f.tier_affinity for f in heavy] == [0.0, 0.5, 1.0, UNKNOWN]


def test_a_request_with_tools_weighs_at_least_half() -> None:
    assert request_weight(RequestProfile(input_tokens=3_200)) == pytest.approx(0.1)
    assert request_weight(RequestProfile(input_tokens=3_200, tools=2)) == 0.5
    assert request_weight(RequestProfile(input_tokens=32_000 * 3, tools=2)) == 1.0


def test_specificity_prefers_a_step_that_names_the_connection() -> None:
    pinned, expanded = factors_of({"pinned": True}, {"pinned": False})
    assert (pinned.specificity_match, expanded.specificity_match) == (1.0, 0.5)


@pytest.mark.parametrize(
    ("needed", "window", "expected"),
    [
        (100, None, UNKNOWN),
        (100, 1000, 1.0),
        (500, 1000, 1.0),
        (750, 1000, 0.625),
        (1000, 1000, 0.25),
        (1001, 1000, 0.0),
    ],
)
def test_context_affinity_is_the_window_room(
    needed: int, window: int | None, expected: float
) -> None:
    assert context_affinity_factor(needed, window) == pytest.approx(expected)
    request = RequestProfile(input_tokens=needed - 1, max_output_tokens=1)
    assert factors_of({"context_window": window}, request=request)[0].context_affinity == (
        pytest.approx(expected)
    )


@pytest.mark.parametrize(
    ("in_flight", "cap", "expected"),
    [(None, 4, 1.0), (3, None, 1.0), (0, 4, 1.0), (3, 4, 0.25), (4, 4, 0.0), (9, 4, 0.0)],
)
def test_session_availability_is_the_free_share_of_the_cap(
    in_flight: int | None, cap: int | None, expected: float
) -> None:
    assert session_availability_factor(in_flight, cap) == expected
    found = factors_of({"in_flight": in_flight, "max_concurrent": cap})
    assert found[0].session_availability == expected


def test_connection_density_counts_the_connections_behind_a_model() -> None:
    found = factors_of({}, {}, {}, {"model": "other"}, {"provider": BETA})
    assert [f.connection_density for f in found] == [1.0, 1.0, 1.0, 1 / 3, 1 / 3]


def test_cache_affinity_follows_the_warm_connection() -> None:
    found = factors_of({"cache_warm": True}, {"cache_warm": False}, {})
    assert [f.cache_affinity for f in found] == [1.0, 0.0, UNKNOWN]


@pytest.mark.parametrize(
    ("reset_in", "expected"),
    [(None, UNKNOWN), (0.0, 1.0), (3.5 * 24 * 3600, 0.5), (7 * 24 * 3600, 0.0), (9e9, 0.0)],
)
def test_reset_window_affinity_is_the_urgency_of_the_reset(
    reset_in: float | None, expected: float
) -> None:
    assert reset_window_factor(reset_in) == pytest.approx(expected)
    found = factors_of({"quota_reset_in_seconds": reset_in})
    assert found[0].reset_window_affinity == pytest.approx(expected)


def test_quality_is_the_known_score_clamped() -> None:
    found = factors_of({"quality": 0.9}, {"quality": 1.7}, {})
    assert [f.quality for f in found] == [0.9, 1.0, UNKNOWN]


def test_every_factor_stays_in_0_1_for_extreme_inputs() -> None:
    extreme = {
        "requests": 5,
        "successes": 9,
        "mean_latency_ms": 0.0,
        "p95_latency_ms": 0.0,
        "quota_used": -3.0,
        "quota_reset_in_seconds": -10.0,
        "input_price": -1.0,
        "context_window": 1,
        "in_flight": -2,
        "max_concurrent": 1,
        "quality": -1.0,
    }
    for factors in factors_of(extreme, {}, request=RequestProfile(10**9, 10**9, tools=999)):
        assert all(0.0 <= v <= 1.0 for v in factors.by_key().values()), factors
