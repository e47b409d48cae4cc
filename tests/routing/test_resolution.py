"""Combo resolution (pure): nested combos and provider wildcards."""

from __future__ import annotations

import pytest

from routing.domain.client.errors import GatewayError
from routing.domain.config.snapshot import ComboInfo, ConfigSnapshot
from routing.domain.plan.planning import plan_route
from routing.domain.plan.resolution import MAX_COMBO_DEPTH, combo_leaves, known_models
from tests.routing.resolution_support import (
    combo,
    conn,
    described,
    entry,
    key,
    provider,
    snapshot,
    step,
)

PROVIDERS = (provider("alpha"), provider("beta"))
# alpha 1 declares three models, alpha 2 two (one shared); beta 3 serves any model.
CONNECTIONS = (
    conn(1, "alpha", "gpt-4o", "gpt-4o-mini", "o1"),
    conn(2, "alpha", "gpt-4o-mini", "gpt-4.1"),
    conn(3, "beta"),
)
CATALOG = (
    entry("alpha/gpt-4o"),
    entry("alpha/gpt-4-turbo"),
    entry("alpha/claude-x"),
    entry("beta/b-small"),
    entry("beta/b-large"),
    entry("beta/a-tiny"),
)


def world(*combos: ComboInfo) -> ConfigSnapshot:
    return snapshot(PROVIDERS, CONNECTIONS, combos, CATALOG)


def planned(world: ConfigSnapshot, name: str) -> list[tuple[str, int, int]]:
    return described(plan_route(world, name, key()).targets)


# --- wildcards --------------------------------------------------------------------------------


def test_known_models_are_the_served_ones_then_the_catalog_s_sorted() -> None:
    assert known_models(world(), "alpha") == [
        "gpt-4o",
        "gpt-4o-mini",
        "o1",
        "gpt-4.1",  # by connection priority, each once
        "claude-x",
        "gpt-4-turbo",  # the catalog's others, by name
    ]
    assert known_models(world(), "beta") == ["a-tiny", "b-large", "b-small"]


def test_a_wildcard_expands_per_model_then_per_connection_serving_it() -> None:
    plan = planned(world(combo("team", "alpha/gpt-4*")), "team")

    assert plan == [
        ("alpha/gpt-4o", 1, 0),
        ("alpha/gpt-4o-mini", 1, 0),
        ("alpha/gpt-4o-mini", 2, 0),
        ("alpha/gpt-4.1", 2, 0),
    ]  # gpt-4-turbo matches, but no alpha connection serves it


def test_catalog_models_reach_connections_that_serve_any_model() -> None:
    assert planned(world(combo("team", "beta/b-*")), "team") == [
        ("beta/b-large", 3, 0),
        ("beta/b-small", 3, 0),
    ]


@pytest.mark.parametrize(
    ("pattern", "models"),
    [
        ("*", ["a-tiny", "b-large", "b-small"]),
        ("?-*", ["a-tiny", "b-large", "b-small"]),
        ("b-?????", ["b-large", "b-small"]),
        ("*-tiny", ["a-tiny"]),
        ("B-*", []),  # case-sensitive
        ("[ab]-*", []),  # no character classes: "[" is a plain character
    ],
)
def test_glob_syntax_is_star_and_question_mark_only(pattern: str, models: list[str]) -> None:
    leaves = combo_leaves(world(), combo("team", f"beta/{pattern}"))

    assert [leaf.model for leaf in leaves] == models


def test_the_order_does_not_depend_on_the_catalog_s_insertion_order() -> None:
    forwards = snapshot(PROVIDERS, CONNECTIONS, [combo("team", "beta/*")], CATALOG)
    backwards = snapshot(PROVIDERS, CONNECTIONS, [combo("team", "beta/*")], CATALOG[::-1])

    assert planned(forwards, "team") == planned(backwards, "team")


def test_a_wildcard_matching_nothing_leaves_the_other_steps() -> None:
    plan = planned(world(combo("team", "alpha/nothing-*", "beta/b-large")), "team")

    assert plan == [("beta/b-large", 3, 1)]


def test_a_combo_left_without_targets_keeps_today_s_error() -> None:
    with pytest.raises(GatewayError) as caught:
        plan_route(world(combo("team", "alpha/nothing-*")), "team", key())

    assert (caught.value.status, caught.value.code) == (503, "all_accounts_inactive")


def test_a_pinned_wildcard_step_stays_on_its_connection() -> None:
    pinned = ComboInfo("team", "priority", (step("alpha/gpt-4*", connection=2),))

    assert planned(world(pinned), "team") == [("alpha/gpt-4o-mini", 2, 0), ("alpha/gpt-4.1", 2, 0)]


def test_a_pair_is_planned_once_for_the_first_step_reaching_it() -> None:
    plan = planned(world(combo("team", "alpha/gpt-4o", "alpha/gpt-4o*")), "team")

    assert plan == [
        ("alpha/gpt-4o", 1, 0),
        ("alpha/gpt-4o-mini", 1, 1),
        ("alpha/gpt-4o-mini", 2, 1),
    ]


def test_a_single_model_with_a_star_is_not_a_pattern() -> None:
    assert planned(world(), "beta/b-*") == [("beta/b-*", 3, 0)]  # beta 3 serves any name


# --- nested combos ----------------------------------------------------------------------------


def test_a_nested_combo_s_targets_take_the_outer_step_s_index() -> None:
    inner = combo("inner", "beta/b-large", "alpha/gpt-4.1")
    outer = combo("outer", "alpha/o1", "combo:inner", "beta/b-small")

    assert planned(world(outer, inner), "outer") == [
        ("alpha/o1", 1, 0),
        ("beta/b-large", 3, 1),
        ("alpha/gpt-4.1", 2, 1),
        ("beta/b-small", 3, 2),
    ]


def test_the_outer_step_s_weight_applies_to_a_nested_combo() -> None:
    inner = combo("inner", "beta/b-large", "beta/b-small")
    outer = ComboInfo(
        "outer", "weighted", (step("alpha/o1", weight=1), step("combo:inner", weight=5))
    )
    world_ = world(outer, inner)

    plan = plan_route(world_, "outer", key())

    weights = [world_.combos["outer"].steps[t.step].weight for t in plan.targets]
    assert weights == [1, 5, 5]


def test_nested_combos_expand_their_own_wildcards_and_pins() -> None:
    inner = ComboInfo("inner", "priority", (step("alpha/gpt-4o*", connection=2), step("beta/a-*")))
    outer = combo("outer", "combo:inner")

    assert planned(world(outer, inner), "outer") == [
        ("alpha/gpt-4o-mini", 2, 0),
        ("beta/a-tiny", 3, 0),
    ]


def test_nesting_stops_at_the_depth_limit() -> None:
    chain = [combo(f"c{n}", f"beta/m{n}", f"combo:c{n + 1}") for n in range(1, 6)]

    models = [leaf.model for leaf in combo_leaves(world(*chain), chain[0])]

    assert MAX_COMBO_DEPTH == 3
    assert models == ["m1", "m2", "m3"]  # c1 → c2 → c3; c3's reference to c4 is too deep


@pytest.mark.parametrize(
    ("combos", "expected"),
    [
        (  # a → b → a
            [combo("a", "beta/ma", "combo:b"), combo("b", "beta/mb", "combo:a")],
            [("beta/ma", 3, 0), ("beta/mb", 3, 1)],
        ),
        (  # a → a (written behind the model's back: clean() refuses it)
            [combo("a", "beta/ma", "combo:a", "combo:b"), combo("b", "beta/mb")],
            [("beta/ma", 3, 0), ("beta/mb", 3, 2)],
        ),
    ],
)
def test_a_cycle_is_skipped(combos: list[ComboInfo], expected: list[tuple[str, int, int]]) -> None:
    assert planned(world(*combos), "a") == expected


def test_a_combo_reached_twice_without_a_cycle_adds_its_pairs_once() -> None:
    shared = combo("shared", "beta/s")
    outer = combo("outer", "combo:shared", "combo:shared")

    assert planned(world(outer, shared), "outer") == [("beta/s", 3, 0)]


def test_an_inactive_nested_combo_contributes_nothing() -> None:
    # The snapshot holds active combos only: an inactive one is simply absent.
    outer = combo("outer", "combo:dormant", "beta/b-large")

    assert planned(world(outer), "outer") == [("beta/b-large", 3, 1)]


def test_a_combo_of_only_inactive_nested_combos_keeps_today_s_error() -> None:
    with pytest.raises(GatewayError) as caught:
        plan_route(world(combo("outer", "combo:dormant")), "outer", key())

    assert caught.value.code == "all_accounts_inactive"


# --- one model twice --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["pipeline", "fusion"])
def test_a_pipeline_or_panel_may_ask_one_model_in_two_steps(strategy: str) -> None:
    team = combo("team", "beta/b-small", "beta/b-small", strategy=strategy)

    assert planned(world(team), "team") == [("beta/b-small", 3, 0), ("beta/b-small", 3, 1)]


def test_other_strategies_plan_a_repeated_model_once() -> None:
    team = combo("team", "beta/b-small", "beta/b-large", "beta/b-small")

    assert planned(world(team), "team") == [("beta/b-small", 3, 0), ("beta/b-large", 3, 1)]
