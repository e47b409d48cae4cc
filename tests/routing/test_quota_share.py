"""The quota-share target selection, pure: in-flight slots, DRR
deficits per combo, bucket and concurrency gating, P2C (times are plain seconds)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import pytest

from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target
from routing.strategies.keys import execution_key
from routing.strategies.quota_share.drr import (
    MAX_COMBOS,
    SLOT_TTL_SECONDS,
    QuotaShareState,
    Selection,
    saturation_buckets,
    select_quota_share_target,
)

NOW = 1000.0
PROVIDER = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)


def target(connection_id: int, model: str = "m", max_concurrent: int | None = None) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider="alpha",
        name=f"alpha-{connection_id}",
        priority=connection_id,
        base_url="https://alpha.test/v1",
        auth_type="api_key",
        secret=f"secret-{connection_id}",
        max_concurrent=max_concurrent,
    )
    return Target(PROVIDER, connection, model)


A, B, C, D = target(1), target(2), target(3), target(4)


def select(
    targets: Sequence[Target],
    state: QuotaShareState,
    *,
    combo: str = "qtSd/team",
    now: float = NOW,
    weights: Sequence[float] | None = None,
    saturated: Collection[int] = frozenset(),
    caps: Mapping[int, int | None] | None = None,
) -> Selection:
    return select_quota_share_target(
        targets,
        combo=combo,
        model="alpha/m",
        now=now,
        state=state,
        weights=weights,
        saturated=saturated,
        caps=caps,
    )


def served(targets: Sequence[Target], state: QuotaShareState, **kwargs: object) -> Target:
    """The winner of one selection, its slot released at once."""
    selection = select(targets, state, **kwargs)  # type: ignore[arg-type]
    assert selection.target is not None and selection.slot is not None
    selection.slot.release()
    return selection.target


# --- in-flight slots ----------------------------------------------------------------------------


def test_slots_count_until_released() -> None:
    state = QuotaShareState()
    first, second = state.acquire(1, NOW), state.acquire(1, NOW)
    state.acquire(2, NOW)
    assert state.in_flight(1, NOW) == 2
    first.release()
    assert state.in_flight(1, NOW) == 1
    assert state.in_flight(2, NOW) == 1
    second.release()
    assert state.in_flight(1, NOW) == 0


def test_release_is_idempotent() -> None:
    state = QuotaShareState()
    slot = state.acquire(1, NOW)
    state.acquire(1, NOW)
    slot.release()
    slot.release()  # must not take the other request's count with it
    assert state.in_flight(1, NOW) == 1


def test_a_slot_never_released_expires_after_the_ttl() -> None:
    state = QuotaShareState()
    slot = state.acquire(1, NOW)
    assert slot.expires_at == NOW + SLOT_TTL_SECONDS
    assert state.in_flight(1, NOW + SLOT_TTL_SECONDS - 0.001) == 1
    assert state.in_flight(1, NOW + SLOT_TTL_SECONDS) == 0
    slot.release()  # late: nothing to take back
    state.acquire(1, NOW + SLOT_TTL_SECONDS)
    assert state.in_flight(1, NOW + SLOT_TTL_SECONDS) == 1


def test_the_slot_ttl_is_configurable() -> None:
    state = QuotaShareState(slot_ttl=5.0)
    state.acquire(1, NOW)
    assert state.in_flight(1, NOW + 4.9) == 1
    assert state.in_flight(1, NOW + 5.0) == 0


def test_saturation_buckets_name_the_bare_model() -> None:
    assert saturation_buckets("openai/gpt-4o") == ("5h", "7d", "7d:gpt-4o")
    assert saturation_buckets("vendor/org/model") == ("5h", "7d", "7d:org/model")
    assert saturation_buckets("gpt-4o") == ("5h", "7d", "7d:gpt-4o")


# --- 6. empty input; a single target ------------------------------------------------------------


def test_no_targets_select_nothing_and_take_no_slot() -> None:
    state = QuotaShareState()
    assert select([], state) == Selection(None, (), None)
    assert state.deficits("qtSd/team") == {}


def test_weights_must_be_aligned_with_the_targets() -> None:
    with pytest.raises(ValueError, match="1 weights for 2 targets"):
        select([A, B], QuotaShareState(), weights=[1.0])


def test_a_single_target_is_served_without_touching_the_deficits() -> None:
    state = QuotaShareState()
    selection = select([A], state)
    assert (selection.target, selection.ordered) == (A, (A,))
    assert state.deficits("qtSd/team") == {}
    assert state.in_flight(1, NOW) == 1


# --- 3. DRR -------------------------------------------------------------------------------------


def test_each_call_adds_the_quanta_and_charges_the_winner_one() -> None:
    state = QuotaShareState()
    assert served([A, B], state, weights=[1, 3]) is B  # deficits 0.25, 0.75
    assert state.deficits("qtSd/team") == {"1:m": 0.25, "2:m": -0.25}  # charged, not zeroed
    assert served([A, B], state, weights=[1, 3]) is A  # 0.5, 0.5: the earlier one
    assert state.deficits("qtSd/team") == {"1:m": -0.5, "2:m": 0.5}


def test_equal_deficits_go_to_the_earlier_target() -> None:
    assert served([B, A], QuotaShareState()) is B
    assert served([A, B], QuotaShareState()) is A


@pytest.mark.parametrize("bad", [0.0, -2.0, float("nan"), float("inf")])
def test_a_weight_that_is_not_finite_and_positive_counts_as_one(bad: float) -> None:
    state = QuotaShareState()
    select([A, B], state, weights=[bad, 1.0])
    assert state.deficits("qtSd/team") == {"1:m": -0.5, "2:m": 0.5}


def test_the_deficit_key_is_the_connection_and_the_model() -> None:
    state = QuotaShareState()
    same_connection = [target(1, "small"), target(1, "large")]
    assert [execution_key(t) for t in same_connection] == ["1:small", "1:large"]
    select(same_connection, state)
    assert set(state.deficits("qtSd/team")) == {"1:small", "1:large"}


def test_drr_shares_requests_in_proportion_to_the_weights() -> None:
    state = QuotaShareState()
    counts = Counter(served([A, B, C], state, weights=[1, 1, 2]) for _ in range(400))
    assert counts == {A: 100, B: 100, C: 200}  # exact: quanta 1/4, 1/4, 1/2, period C A B C


def test_the_other_targets_with_room_follow_in_input_order() -> None:
    state = QuotaShareState()
    selection = select([A, B, C], state, weights=[1, 2, 4])  # C wins; B's deficit beats A's
    assert selection.ordered == (C, A, B)


def test_each_combo_keeps_its_own_deficits() -> None:
    state = QuotaShareState()
    assert served([A, B], state, combo="one") is A
    assert served([A, B], state, combo="two") is A
    assert served([A, B], state, combo="one") is B


def test_the_least_recently_used_combo_is_forgotten_past_the_limit() -> None:
    state = QuotaShareState()
    for number in range(MAX_COMBOS):
        served([A, B], state, combo=f"combo-{number}", now=NOW + number)
    served([A, B], state, combo="combo-0")  # a use: combo-1 is now the oldest
    served([A, B], state, combo="one-too-many")
    assert state.deficits("combo-1") == {}
    assert state.deficits("combo-0") != {}
    assert state.deficits("combo-2") != {}
    assert state.deficits("one-too-many") != {}


# --- 4. P2C -------------------------------------------------------------------------------------


def test_p2c_serves_drr_second_when_it_has_fewer_in_flight() -> None:
    state = QuotaShareState()
    state.acquire(1, NOW)  # A is busy
    assert served([A, B], state) is B  # A is DRR #1 (tie, earlier) and is charged
    assert state.deficits("qtSd/team") == {"1:m": -0.5, "2:m": 0.5}
    state.acquire(2, NOW)  # equal in flight now: DRR #1 (B, deficit 1.0) wins
    assert served([A, B], state) is B


def test_p2c_looks_only_at_the_two_largest_deficits() -> None:
    state = QuotaShareState()
    for _ in range(2):
        state.acquire(1, NOW)
    state.acquire(2, NOW)  # C, DRR #3, is idle but is not one of the two choices
    assert served([A, B, C], state) is B


def test_p2c_tie_keeps_drr_first() -> None:
    state = QuotaShareState()
    state.acquire(1, NOW)
    state.acquire(2, NOW)
    assert served([A, B], state) is A


# --- 5. the winner's slot -----------------------------------------------------------------------


def test_the_winner_takes_a_slot_at_once_and_releases_it_once() -> None:
    state = QuotaShareState()
    selection = select([A, B], state)
    assert selection.target is A and selection.slot is not None
    assert (state.in_flight(1, NOW), state.in_flight(2, NOW)) == (1, 0)
    state.acquire(1, NOW)
    selection.slot.release()
    selection.slot.release()
    assert state.in_flight(1, NOW) == 1


# --- 2. concurrency gating ----------------------------------------------------------------------


def test_a_connection_at_its_cap_goes_behind_and_is_not_served() -> None:
    state = QuotaShareState()
    capped = target(1, max_concurrent=1)
    state.acquire(1, NOW)  # one unreleased slot: at its cap
    for _ in range(20):
        selection = select([capped, B, C], state)
        assert selection.target in (B, C)
        assert selection.ordered[-1] is capped
        assert selection.slot is not None
        selection.slot.release()
    assert "1:m" not in state.deficits("qtSd/team")  # no quanta while it had no room


def test_under_its_cap_a_connection_is_served() -> None:
    state = QuotaShareState()
    roomy = target(1, max_concurrent=2)
    state.acquire(1, NOW)
    state.acquire(2, NOW)  # as busy: P2C does not decide
    assert select([roomy, B], state).ordered == (roomy, B)


def test_every_connection_at_its_cap_demotes_none() -> None:
    state = QuotaShareState()
    capped = [target(1, max_concurrent=1), target(2, max_concurrent=1)]
    state.acquire(1, NOW)
    state.acquire(2, NOW)
    assert select(capped, state).ordered == tuple(capped)
    assert served(capped, state) is capped[1]  # DRR still runs over all of them


def test_a_slot_past_its_ttl_frees_the_cap() -> None:
    state = QuotaShareState()
    capped = target(1, max_concurrent=1)
    state.acquire(1, NOW)
    assert select([capped, B], state, now=NOW).target is B
    assert select([capped, B], state, now=NOW + SLOT_TTL_SECONDS).target is capped


@pytest.mark.parametrize(
    ("max_concurrent", "caps", "demoted"),
    [
        (None, {1: 1}, True),  # the given cap
        (1, {1: None}, False),  # a given None: no cap
        (1, {1: 0}, False),  # ≤ 0: no cap
        (1, {2: 5}, True),  # not given for this connection: its max_concurrent
        (0, None, False),
        (-1, None, False),
    ],
)
def test_the_cap_comes_from_caps_else_max_concurrent(
    max_concurrent: int | None, caps: dict[int, int | None] | None, demoted: bool
) -> None:
    state = QuotaShareState()
    first = target(1, max_concurrent=max_concurrent)
    state.acquire(1, NOW)
    state.acquire(2, NOW)  # as busy: P2C does not decide
    assert select([first, B], state, caps=caps).ordered == ((B, first) if demoted else (first, B))


# --- 1. bucket gating ---------------------------------------------------------------------------


def test_saturated_connections_go_last_after_those_at_cap() -> None:
    state = QuotaShareState()
    capped = target(2, max_concurrent=1)
    state.acquire(2, NOW)
    selection = select([A, capped, C, D], state, saturated={1})
    assert selection.ordered == (C, D, capped, A)
    assert set(state.deficits("qtSd/team")) == {"3:m", "4:m"}


def test_a_saturated_connection_is_not_served_while_another_is_not() -> None:
    state = QuotaShareState()
    assert {served([A, B], state, saturated={1}) for _ in range(10)} == {B}


def test_every_connection_saturated_demotes_none() -> None:
    state = QuotaShareState()
    assert select([A, B], state, saturated={1, 2}).ordered == (A, B)
    assert served([A, B], state, saturated={1, 2}) is B  # DRR runs over all of them
