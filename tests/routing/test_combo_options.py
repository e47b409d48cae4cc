"""Per-strategy combo options (pure): keys, bounds, normalisation and the typed read."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from routing.domain.config.combo_options import (
    COMMON,
    DEFAULT_OPTIONS,
    OPTION_SPECS,
    ComboOptions,
    ComboOptionsError,
    OptionKind,
    combo_options_validate,
    option_specs,
    options_help,
    options_read,
)


def refused(strategy: str, raw: Any) -> list[str]:
    with pytest.raises(ComboOptionsError) as caught:
        combo_options_validate(strategy, raw)
    return caught.value.messages()


# (strategy, key, lowest valid, highest valid, just below, just above)
BOUNDS = [
    ("weighted", "stickyWeightedLimit", 1, 1000, 0, 1001),
    ("round-robin", "stickyRoundRobinLimit", 1, 1000, 0, 1001),
    ("round-robin", "memberConcurrency", 0, 1000, -1, 1001),
    ("reset-aware", "resetAwareSessionWeight", 0, 1, -0.01, 1.01),
    ("reset-aware", "resetAwareWeeklyWeight", 0, 1, -0.01, 1.01),
    ("reset-aware", "resetAwareTieBandPercent", 0, 100, -0.5, 100.5),
    ("reset-aware", "resetAwareExhaustionGuardPercent", 0, 100, -1, 101),
    ("reset-aware", "resetAwareQuotaCacheTtlMs", 0, 300_000, -1, 300_001),
    ("reset-aware", "resetAwareQuotaCacheMaxStaleMs", 0, 3_600_000, -1, 3_600_001),
    ("reset-window", "resetWindowTieBandMs", -1, 86_400_000, -2, 86_400_001),
    ("auto", "explorationRate", 0, 1, -0.1, 1.1),
    ("fusion", "minPanel", 2, 20, 1, 21),
    ("fusion", "stragglerGraceMs", 0, 120_000, -1, 120_001),
    ("fusion", "panelHardTimeoutMs", 1_000, 600_000, 999, 600_001),
]


@pytest.mark.parametrize(("strategy", "key", "low", "high", "below", "above"), BOUNDS)
def test_every_numeric_key_takes_its_bounds_and_refuses_beyond(
    strategy: str, key: str, low: float, high: float, below: float, above: float
) -> None:
    assert combo_options_validate(strategy, {key: low}) == {key: low}
    assert combo_options_validate(strategy, {key: high}) == {key: high}
    for outside in (below, above):
        (message,) = refused(strategy, {key: outside})
        assert message == f"{key}: must be between {low} and {high}"


def test_the_bounds_table_covers_every_numeric_key() -> None:
    numeric = {
        s.key
        for specs in OPTION_SPECS.values()
        for s in specs
        if s.kind in (OptionKind.INT, OptionKind.NUMBER)
    }

    assert numeric == {row[1] for row in BOUNDS} | {"handoffThreshold"}


@pytest.mark.parametrize("value", [0, 0.95, -0.1, 1])
def test_the_handoff_threshold_is_strictly_between_0_and_0_95(value: float) -> None:
    (message,) = refused("context-relay", {"handoffThreshold": value})

    assert message == "handoffThreshold: must be greater than 0 and less than 0.95"


def test_the_handoff_threshold_inside_its_bounds() -> None:
    assert combo_options_validate("context-relay", {"handoffThreshold": 0.9}) == {
        "handoffThreshold": 0.9
    }


@pytest.mark.parametrize(
    ("strategy", "raw", "message"),
    [
        ("round-robin", {"memberConcurrency": 2.5}, "memberConcurrency: must be an integer"),
        ("round-robin", {"memberConcurrency": "2"}, "memberConcurrency: must be an integer"),
        ("round-robin", {"memberConcurrency": True}, "memberConcurrency: must be an integer"),
        ("auto", {"explorationRate": "0.1"}, "explorationRate: must be a number"),
        ("auto", {"explorationRate": float("nan")}, "explorationRate: must be a number"),
        ("priority", {"compatFilterFailOpen": 1}, "compatFilterFailOpen: must be true or false"),
        (
            "auto",
            {"mode": "clever"},
            "mode: must be one of rules, score, smart, cost, eco, "
            "latency, fast, sla-aware, sla, lkgp",
        ),
        (
            "reset-window",
            {"resetWindowWindows": []},
            "resetWindowWindows: must be a non-empty list of session, weekly, monthly",
        ),
        (
            "reset-window",
            {"resetWindowWindows": ["daily"]},
            "resetWindowWindows: must be a non-empty list of session, weekly, monthly",
        ),
        (
            "reset-window",
            {"resetWindowWindows": "weekly"},
            "resetWindowWindows: must be a list of names",
        ),
        (
            "context-relay",
            {"handoffProviders": ["co dex"]},
            "handoffProviders: not provider slugs: co dex",
        ),
        (
            "context-relay",
            {"handoffProviders": [1]},
            "handoffProviders: must be a list of provider slugs",
        ),
        ("auto", {"weights": {"speed": 1}}, "weights: unknown factors speed"),
        (
            "auto",
            {"weights": {"quota": -1}},
            "weights: weights are numbers from 0 to 1,000,000: quota",
        ),
        (
            "auto",
            {"weights": {"quota": 1.7e308, "health": 1}},
            "weights: weights are numbers from 0 to 1,000,000: quota",
        ),
        (
            "auto",
            {"weights": {"quota": 10**400}},
            "weights: is out of range (at most 1e+18 either way)",
        ),
        ("fusion", {"minPanel": 10**400}, "minPanel: is out of range (at most 1e+18 either way)"),
        ("auto", {"weights": {"quota": "1"}}, "weights: must be a number"),
        (
            "auto",
            {"weights": [1]},
            "weights: must be an object mapping a factor to a non-negative number",
        ),
        ("fusion", {"judgeModel": "gpt-4o"}, "judgeModel: must be provider/model, or empty"),
        ("fusion", {"judgeModel": "/gpt-4o"}, "judgeModel: must be provider/model, or empty"),
        ("fusion", {"judgeModel": None}, "judgeModel: must be a string: provider/model, or empty"),
    ],
)
def test_wrong_values_are_refused_naming_the_key(strategy: str, raw: Any, message: str) -> None:
    (said,) = refused(strategy, raw)

    assert said.startswith(message)


def test_an_unknown_key_is_refused_with_the_strategy_s_keys() -> None:
    (message,) = refused("round-robin", {"stickyLimit": 2})

    assert message == (
        "stickyLimit: unknown key (the keys of round-robin are compatFilterFailOpen, "
        "stickyRoundRobinLimit, memberConcurrency)"
    )


@pytest.mark.parametrize(
    ("strategy", "key", "owner"),
    [
        ("round-robin", "stickyWeightedLimit", "weighted"),
        ("priority", "stickyRoundRobinLimit", "round-robin"),
        ("weighted", "minPanel", "fusion"),
        ("fusion", "mode", "auto"),
    ],
)
def test_a_key_of_another_strategy_is_refused(strategy: str, key: str, owner: str) -> None:
    (message,) = refused(strategy, {key: 2})

    assert message == f"{key}: an option of the {owner} strategy, not of {strategy}"


def test_every_bad_key_is_reported_at_once() -> None:
    messages = refused("weighted", {"stickyWeightedLimit": 0, "nope": 1})

    assert [m.split(":")[0] for m in messages] == ["stickyWeightedLimit", "nope"]


@pytest.mark.parametrize("raw", [[], "x", 3])
def test_options_must_be_an_object(raw: Any) -> None:
    assert refused("priority", raw) == ["must be a JSON object"]


def test_values_are_normalised() -> None:
    checked = combo_options_validate(
        "reset-aware", {"resetAwareTieBandPercent": 5.0, "resetAwareSessionWeight": 0.5}
    )

    assert checked == {"resetAwareTieBandPercent": 5, "resetAwareSessionWeight": 0.5}
    assert isinstance(checked["resetAwareTieBandPercent"], int)
    assert combo_options_validate("round-robin", {"memberConcurrency": 3.0}) == {
        "memberConcurrency": 3
    }
    windows = combo_options_validate("reset-window", {"resetWindowWindows": ["weekly"] * 2})
    assert windows == {"resetWindowWindows": ["weekly"]}
    weights = combo_options_validate("auto", {"weights": {"quota": 2.0, "health": 0.5}})
    assert weights == {"weights": {"quota": 2, "health": 0.5}}


@pytest.mark.parametrize(
    ("strategy", "raw"),
    [
        ("context-relay", {"handoffProviders": []}),  # empty: the handoff is off
        ("context-relay", {"handoffProviders": ["codex", "open_ai-2"]}),
        ("auto", {"weights": None, "mode": "sla-aware"}),
        ("fusion", {"judgeModel": ""}),
        ("fusion", {"judgeModel": "openai/gpt-4o"}),
        ("reset-window", {"resetWindowWindows": ["monthly", "session"]}),
        ("fill-first", {"compatFilterFailOpen": True}),
    ],
)
def test_valid_values_are_kept(strategy: str, raw: dict[str, Any]) -> None:
    assert combo_options_validate(strategy, raw) == raw


def test_none_means_no_options() -> None:
    assert combo_options_validate("priority", None) == {}


# --- the typed read ---------------------------------------------------------------------------


def test_the_typed_defaults_are_the_table_s() -> None:
    specs = {s.field: s for specs in OPTION_SPECS.values() for s in specs}

    assert {f.name for f in fields(ComboOptions)} == set(specs)
    for name, spec in specs.items():
        assert getattr(DEFAULT_OPTIONS, name) == spec.default, name


def test_read_fills_the_defaults_and_types_the_values() -> None:
    options = options_read("round-robin", {"stickyRoundRobinLimit": 3})

    assert options == ComboOptions(sticky_round_robin_limit=3)
    assert options_read("priority", {}) is DEFAULT_OPTIONS
    assert options_read("priority", None) is DEFAULT_OPTIONS
    relay = options_read("context-relay", {"handoffProviders": ["a", "b"]})
    assert relay.handoff_providers == ("a", "b")
    auto = options_read("auto", {"weights": {"quota": 1, "health": 0.5}, "mode": "cost"})
    assert (auto.mode, auto.weight_map) == ("cost", {"quota": 1.0, "health": 0.5})
    assert DEFAULT_OPTIONS.weight_map is None


def test_read_replaces_invalid_or_foreign_values_by_defaults() -> None:
    stored = {
        "stickyRoundRobinLimit": 0,
        "memberConcurrency": 4,
        "stickyWeightedLimit": 9,
        "compatFilterFailOpen": "yes",
        "junk": 1,
    }

    options = options_read("round-robin", stored)

    assert options == ComboOptions(member_concurrency=4)


def test_help_lists_the_strategy_s_keys_with_bounds_and_defaults() -> None:
    text = options_help("round-robin")

    assert text == (
        "compatFilterFailOpen (true|false; default false), "
        "stickyRoundRobinLimit (1–1000; default 1), memberConcurrency (0–1000; default 0)"
    )
    assert "handoffThreshold (0 < x < 0.95; default 0.85)" in options_help("context-relay")
    assert "resetWindowWindows (session|weekly|monthly; default [weekly])" in options_help(
        "reset-window"
    )
    assert [s.key for s in option_specs("priority")] == [s.key for s in OPTION_SPECS[COMMON]]


def test_stored_weights_that_would_overflow_their_sum_are_read_as_the_default() -> None:
    """Saved before weights were bounded: each finite, their sum not (every request a 500)."""
    stored = {"weights": {"quota": 1.7e308, "health": 1.7e308}, "minPanel": 10**400}

    assert options_read("auto", stored).weights == DEFAULT_OPTIONS.weights
