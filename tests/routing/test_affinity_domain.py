"""Session affinity's pure rules: pins on an injected clock, the
least-recently-used choice, usage records, and where the chosen connection goes in a plan."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from routing.domain.affinity.pins import (
    OWNS_ORDERING,
    Pin,
    Usage,
    live_pin,
    lru_choice,
    pin_after_answer,
    pin_hash,
    provider_candidates,
    usage_after_choice,
    usage_from_json,
    usage_to_json,
    with_first,
    write_due,
)
from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import Strategy, WireFormat
from routing.domain.plan.planning import Target

NOW = 1_700_000_000.0
TTL = 600.0


def provider(slug: str) -> ProviderInfo:
    return ProviderInfo(slug, slug.title(), "api_key", f"https://{slug}.test/v1", WireFormat.OPENAI)


def target(
    connection_id: int, model: str = "m", step: int = 0, slug: str = "alpha", priority: int = 0
) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider=slug,
        name=f"{slug}-{connection_id}",
        priority=priority or connection_id,
        base_url=f"https://{slug}.test/v1",
        auth_type="api_key",
    )
    return Target(provider(slug), connection, model, step)


def ids(targets: Sequence[Target]) -> list[tuple[str, int, str]]:
    return [(t.provider.slug, t.connection.id, t.model) for t in targets]


# --- pins --------------------------------------------------------------------------------------


def test_a_pin_is_named_by_a_hash_of_provider_and_session() -> None:
    name = pin_hash("alpha", "7:header:session-xyz")

    assert len(name) == 64 and int(name, 16) >= 0
    assert name == pin_hash("alpha", "7:header:session-xyz")
    assert name != pin_hash("beta", "7:header:session-xyz")
    assert name != pin_hash("alpha", "8:header:session-xyz")
    assert "xyz" not in name


def test_a_pin_round_trips_through_its_record() -> None:
    pin = Pin(3, NOW, NOW + 5, NOW + 605, saved_at=NOW)

    assert Pin.from_dict(pin.to_dict()) == pin
    assert Pin.from_dict(Pin(3, NOW, NOW, NOW + 1).to_dict()) == Pin(3, NOW, NOW, NOW + 1)


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "pin",
        [],
        {},
        {"connectionId": "3", "createdAt": NOW, "lastUsedAt": NOW, "expiresAt": NOW},
        {"connectionId": True, "createdAt": NOW, "lastUsedAt": NOW, "expiresAt": NOW},
        {"connectionId": 3, "createdAt": NOW, "lastUsedAt": NOW},
        {"connectionId": 3, "createdAt": "now", "lastUsedAt": NOW, "expiresAt": NOW},
        {"connectionId": 3, "createdAt": NOW, "lastUsedAt": NOW, "expiresAt": float("inf")},
    ],
)
def test_a_malformed_record_is_no_pin(raw: object) -> None:
    assert Pin.from_dict(raw) is None
    assert live_pin(raw, NOW, TTL) is None


@pytest.mark.parametrize(
    ("elapsed", "ttl", "live"),
    [(0.0, TTL, True), (599.9, TTL, True), (600.0, TTL, False), (100.0, 60.0, False)],
)
def test_a_pin_lasts_its_ttl_from_its_last_use(elapsed: float, ttl: float, live: bool) -> None:
    pin = Pin(3, NOW, NOW, NOW + TTL)  # the last case: an operator shortened the TTL since

    assert pin.live(NOW + elapsed, ttl) is live
    assert (live_pin(pin.to_dict(), NOW + elapsed, ttl) is not None) is live


def test_an_answer_from_the_pinned_connection_slides_the_pin() -> None:
    pin = Pin(3, NOW, NOW, NOW + TTL, saved_at=NOW)

    after = pin_after_answer(pin, 3, NOW + 100, TTL)

    assert after == Pin(3, NOW, NOW + 100, NOW + 100 + TTL, saved_at=NOW)


@pytest.mark.parametrize(
    ("current", "reason"),
    [
        (None, "a first pin"),
        (Pin(4, NOW, NOW, NOW + TTL), "the session moved"),
        (Pin(3, NOW - 900, NOW - 900, NOW - 300), "the old pin lapsed"),
    ],
)
def test_any_other_answer_makes_a_new_pin(current: Pin | None, reason: str) -> None:
    assert pin_after_answer(current, 3, NOW, TTL) == Pin(3, NOW, NOW, NOW + TTL), reason


@pytest.mark.parametrize(
    ("before", "after", "due"),
    [
        (None, Pin(3, NOW, NOW, NOW + TTL), True),
        (Pin(4, NOW, NOW, NOW + TTL, NOW), Pin(3, NOW, NOW, NOW + TTL), True),
        (Pin(3, NOW, NOW, NOW + TTL, None), Pin(3, NOW, NOW, NOW + TTL), True),
        (Pin(3, NOW, NOW, NOW + TTL, NOW - 59), Pin(3, NOW, NOW, NOW + TTL, NOW - 59), False),
        (Pin(3, NOW, NOW, NOW + TTL, NOW - 60), Pin(3, NOW, NOW, NOW + TTL, NOW - 60), True),
    ],
)
def test_the_durable_copy_is_written_when_made_moved_or_due(
    before: Pin | None, after: Pin, due: bool
) -> None:
    assert write_due(before, after, NOW, 60.0) is due


# --- the least-recently-used choice -----------------------------------------------------

NEVER: dict[int, Usage] = {}


@pytest.mark.parametrize(
    ("candidates", "usage", "chosen", "rule"),
    [
        ([(1, 30), (2, 10), (3, 20)], NEVER, 2, "none used: the lowest priority"),
        ([(1, 10), (2, 20)], {1: Usage(NOW, 1)}, 2, "never used before used"),
        ([(1, 10), (2, 20)], {1: Usage(NOW, 1), 2: Usage(NOW - 5, 9)}, 2, "older lastUsedAt"),
        ([(1, 10), (2, 20)], {1: Usage(NOW, 3), 2: Usage(NOW, 2)}, 2, "fewer uses in a row"),
        ([(1, 20), (2, 10)], {1: Usage(NOW, 1), 2: Usage(NOW, 1)}, 2, "lower priority"),
        ([(1, 10), (2, 10)], {1: Usage(NOW, 1), 2: Usage(NOW, 1)}, 1, "then the plan's order"),
        ([(5, 10), (1, 10)], NEVER, 5, "never used, same priority: the plan's order"),
    ],
)
def test_the_least_recently_used_connection_is_chosen(
    candidates: list[tuple[int, int]], usage: dict[int, Usage], chosen: int, rule: str
) -> None:
    assert lru_choice(candidates, usage) == chosen, rule


def test_a_choice_counts_uses_in_a_row_only_for_the_pin() -> None:
    usage = {1: Usage(NOW - 10, 4), 2: Usage(NOW - 20, 2)}

    assert usage_after_choice(usage, 1, NOW, pinned=True)[1] == Usage(NOW, 5)
    assert usage_after_choice(usage, 2, NOW, pinned=False)[2] == Usage(NOW, 1)
    assert usage_after_choice({}, 3, NOW, pinned=False) == {3: Usage(NOW, 1)}
    assert usage == {1: Usage(NOW - 10, 4), 2: Usage(NOW - 20, 2)}  # not changed in place


def test_usage_round_trips_and_forgets_what_is_long_unused() -> None:
    usage = {1: Usage(NOW - 10, 4), 2: Usage(NOW - 1_000, 2), 3: Usage(None, 0)}

    record = usage_to_json(usage, NOW, keep_seconds=500)

    assert record == {"1": [NOW - 10, 4]}
    assert usage_from_json(record) == {1: Usage(NOW - 10, 4)}


@pytest.mark.parametrize(
    "raw",
    [None, [], {"x": [NOW, 1]}, {"1": [NOW]}, {"1": ["now", 1]}, {"1": [NOW, "1"]}, {"1": 3}],
)
def test_malformed_usage_entries_are_left_out(raw: object) -> None:
    assert usage_from_json(raw) == {}


# --- where the choice goes ----------------------------------------------------------------------


def test_a_single_model_plan_puts_the_chosen_connection_first() -> None:
    plan = [target(1), target(2), target(3)]

    assert ids(with_first(plan, "alpha", 3)) == [
        ("alpha", 3, "m"),
        ("alpha", 1, "m"),
        ("alpha", 2, "m"),
    ]
    assert with_first(plan, "alpha", 1) == tuple(plan)
    assert with_first(plan, "alpha", 9) == tuple(plan)  # not in the plan: nothing moves
    assert with_first(plan, "beta", 3) == tuple(plan)


def test_targets_never_cross_steps() -> None:
    # A priority combo: step 0 (alpha, two connections), step 1 (beta), step 2 (alpha/n, two).
    plan = [
        target(1, step=0),
        target(2, step=0),
        target(7, step=1, slug="beta"),
        target(1, "n", step=2),
        target(2, "n", step=2),
    ]

    ordered = with_first(plan, "alpha", 2)

    assert ids(ordered) == [
        ("alpha", 2, "m"),
        ("alpha", 1, "m"),
        ("beta", 7, "m"),
        ("alpha", 2, "n"),
        ("alpha", 1, "n"),
    ]
    assert [t.step for t in ordered] == [0, 0, 1, 2, 2]


def test_a_shuffled_step_keeps_the_positions_it_holds() -> None:
    plan = [target(1), target(7, slug="beta", step=1), target(2), target(3)]

    assert ids(with_first(plan, "alpha", 3)) == [
        ("alpha", 3, "m"),
        ("beta", 7, "m"),
        ("alpha", 1, "m"),
        ("alpha", 2, "m"),
    ]


def test_each_provider_lists_its_connections_once_in_plan_order() -> None:
    plan = [target(2), target(1), target(2, "n"), target(7, slug="beta", priority=40)]

    assert provider_candidates(plan) == {"alpha": [(2, 2), (1, 1)], "beta": [(7, 40)]}


def test_the_strategies_that_own_their_order_are_left_alone() -> None:
    assert {str(s) for s in OWNS_ORDERING} == {
        "cache-optimized",
        "quota-share",
        "round-robin",
        "strict-random",
        "fusion",
        "pipeline",
        "reset-aware",
        "headroom",
        "reset-window",
        "auto",
    }
    assert Strategy.PRIORITY not in OWNS_ORDERING and Strategy.WEIGHTED not in OWNS_ORDERING
