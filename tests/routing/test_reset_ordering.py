"""The quota-driven orderings, pure: the reset-aware
score worked by hand, then reset-aware, reset-window and headroom over small target sets.
Times are epoch seconds; ``NOW`` is the one clock reading of a request."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import pytest

from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target
from routing.domain.quota.snapshots import MONTHLY, SESSION, WEEKLY, QuotaSnapshot, QuotaWindow
from routing.strategies.quota.reset import (
    ResetAwareConfig,
    headroom,
    reset_aware,
    reset_aware_score,
    reset_window,
)

NOW = 1_700_000_000.0
HOUR = 3600.0
DAY = 86_400.0
DEFAULT = ResetAwareConfig()
PROVIDER = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)


def target(connection_id: int) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider="alpha",
        name=f"alpha-{connection_id}",
        priority=connection_id,
        base_url="https://alpha.test/v1",
        auth_type="api_key",
    )
    return Target(PROVIDER, connection, "m")


A, B, C, D, E, F = (target(i) for i in range(1, 7))


def snap(
    percent_used: float | None,
    reset_at: float | None = None,
    limit_reached: bool = False,
    **windows: tuple[float | None, float | None],
) -> QuotaSnapshot:
    """A snapshot taken at ``NOW`` with the given windows as (used, reset) pairs."""
    named = {name: QuotaWindow(*figures) for name, figures in windows.items()}
    return QuotaSnapshot(percent_used, reset_at, limit_reached, named, NOW)


def by_id(snapshots: Mapping[int, QuotaSnapshot]) -> Callable[[Target], QuotaSnapshot | None]:
    return lambda t: snapshots.get(t.connection.id)


def ids(targets: Sequence[Target]) -> list[int]:
    return [t.connection.id for t in targets]


# -- the score, worked by hand (default weights: session 0.35, weekly 0.65) -----------------------

# A fresh account: 0 % used, resets unknown (urgency 0.5).
#   session = 0.45·1 + 0.55·0.5·0 = 0.45;  weekly = 0.25·1 + 0.75·0.5·0 = 0.25
#   score = 0.35·0.45 + 0.65·0.25 = 0.1575 + 0.1625 = 0.32
FRESH = snap(0.0)
# 80 % of the week used, resetting in 1 h. No session window: remaining = 1 - overall = 0.2.
#   session = 0.45·0.2 + 0.55·0.5·0.8 = 0.09 + 0.22 = 0.31
#   urgency_w = 1 - 1 h / 168 h = 167/168;  weekly = 0.25·0.2 + 0.75·(167/168)·0.8 = 0.646428571
#   score = 0.35·0.31 + 0.65·0.646428571 = 0.1085 + 0.420178571 = 0.528678571
NEAR_RESET = snap(0.8, NOW + HOUR, weekly=(0.8, NOW + HOUR))
# 20 % of the week used, resetting in 6 days: remaining 0.8 everywhere.
#   session = 0.45·0.8 + 0.55·0.5·0.2 = 0.36 + 0.055 = 0.415
#   urgency_w = 1 - 6/7 = 1/7;  weekly = 0.25·0.8 + 0.75·(1/7)·0.2 = 0.2 + 0.021428571 = 0.221428571
#   score = 0.35·0.415 + 0.65·0.221428571 = 0.14525 + 0.143928571 = 0.289178571
FAR_RESET = snap(0.2, NOW + 6 * DAY, weekly=(0.2, NOW + 6 * DAY))
# 5 % of the session left (resetting in 1 h of 5), half the week left (resetting in 3.5 days).
#   urgency_s = 1 - 1/5 = 0.8;  session = 0.45·0.05 + 0.55·0.8·0.95 = 0.0225 + 0.418 = 0.4405
#   urgency_w = 1 - 3.5/7 = 0.5;  weekly = 0.25·0.5 + 0.75·0.5·0.5 = 0.125 + 0.1875 = 0.3125
#   score = 0.35·0.4405 + 0.65·0.3125 = 0.154175 + 0.203125 = 0.3573
#   guard: 0.05 < 0.10, so ×max(0.05, 0.05 / 0.10) = ×0.5 -> 0.17865
GUARDED = snap(0.95, session=(0.95, NOW + HOUR), weekly=(0.5, NOW + 3.5 * DAY))
# Session 10 % used (reset unknown), week 30 % (reset unknown), month 60 % resetting in 15 days.
#   session = 0.45·0.9 + 0.55·0.5·0.1 = 0.405 + 0.0275 = 0.4325
#   weekly = 0.25·0.7 + 0.75·0.5·0.3 = 0.175 + 0.1125 = 0.2875
#   base = 0.35·0.4325 + 0.65·0.2875 = 0.151375 + 0.186875 = 0.33825
#   urgency_m = 1 - 15/30 = 0.5;  monthly = 0.25·0.4 + 0.75·0.5·0.6 = 0.1 + 0.225 = 0.325
#   score = 0.75·0.33825 + 0.25·0.325 = 0.2536875 + 0.08125 = 0.3349375
MONTHLY_TOO = snap(0.6, session=(0.1, None), weekly=(0.3, None), monthly=(0.6, NOW + 15 * DAY))
# Half the session used, resetting in 2.5 h; no weekly window, and the snapshot's own reset
# (the weekly fallback) already past, so urgency_w = 1.
#   session = 0.45·0.5 + 0.55·(1 - 2.5/5)·0.5 = 0.225 + 0.1375 = 0.3625
#   weekly = 0.25·0.5 + 0.75·1·0.5 = 0.125 + 0.375 = 0.5
#   score = 0.35·0.3625 + 0.65·0.5 = 0.126875 + 0.325 = 0.451875
PAST_FALLBACK = snap(0.5, NOW - 10, session=(0.5, NOW + 2.5 * HOUR))
# Nothing left of the session (reset unknown): weekly falls back to overall 1.0 used.
#   session = 0 + 0.55·0.5·1 = 0.275;  weekly = 0 + 0.75·0.5·1 = 0.375
#   score = 0.35·0.275 + 0.65·0.375 = 0.09625 + 0.24375 = 0.34; guard ×max(0.05, 0) -> 0.017
DRAINED = snap(1.0, session=(1.0, None))


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        (None, 0.5),
        (FRESH, 0.32),
        (snap(0.0, session=(0.0, None), weekly=(0.0, None)), 0.32),
        (NEAR_RESET, 0.528678571),
        (FAR_RESET, 0.289178571),
        (GUARDED, 0.17865),
        (MONTHLY_TOO, 0.3349375),
        (PAST_FALLBACK, 0.451875),
        (DRAINED, 0.017),
    ],
    ids=["no-quota", "fresh", "fresh-windows", "near", "far", "guard", "monthly", "past", "floor"],
)
def test_reset_aware_score_worked_examples(snapshot: QuotaSnapshot | None, expected: float) -> None:
    assert reset_aware_score(snapshot, NOW, DEFAULT) == pytest.approx(expected, abs=1e-9)


def test_a_reached_limit_scores_minus_infinity_whatever_its_windows() -> None:
    exhausted = snap(0.0, NOW + 60, True, session=(0.0, NOW + 60), weekly=(0.0, NOW + 60))
    assert reset_aware_score(exhausted, NOW, DEFAULT) == -math.inf


def test_the_account_about_to_lose_its_quota_scores_higher() -> None:
    assert reset_aware_score(NEAR_RESET, NOW, DEFAULT) > reset_aware_score(FAR_RESET, NOW, DEFAULT)


def test_a_window_figure_above_one_is_a_percent() -> None:
    as_percent = snap(0.8, NOW + HOUR, weekly=(80.0, NOW + HOUR))
    assert reset_aware_score(as_percent, NOW, DEFAULT) == pytest.approx(0.528678571)


def test_the_weights_are_normalised() -> None:
    # Fresh account, weights 1:3 -> 0.25 / 0.75: 0.25·0.45 + 0.75·0.25 = 0.1125 + 0.1875 = 0.3
    config = ResetAwareConfig(session_weight=1, weekly_weight=3)
    assert (config.session_weight, config.weekly_weight) == (0.25, 0.75)
    assert reset_aware_score(FRESH, NOW, config) == pytest.approx(0.3)
    for zero in (ResetAwareConfig(0, 0), ResetAwareConfig(-1, math.nan)):
        assert (zero.session_weight, zero.weekly_weight) == pytest.approx((0.35, 0.65))
    assert ResetAwareConfig(session_weight=-2, weekly_weight=5).weekly_weight == 1.0
    assert (DEFAULT.tie_band, DEFAULT.exhaustion_guard) == pytest.approx((0.05, 0.10))


def test_a_zero_guard_never_scales_the_score() -> None:
    # DRAINED unguarded is the 0.34 of its worked example.
    no_guard = ResetAwareConfig(exhaustion_guard_percent=0)
    assert reset_aware_score(DRAINED, NOW, no_guard) == pytest.approx(0.34)


# -- reset-aware ordering -------------------------------------------------------------------------

# Scores: A 0.5 (no quota), B -inf, C 0.5287, D 0.2892, E 0.32.
MIXED = {2: snap(0.1, limit_reached=True), 3: NEAR_RESET, 4: FAR_RESET, 5: FRESH}


def test_reset_aware_rotates_the_tie_band_at_the_front() -> None:
    # Best 0.5287; A's 0.5 is within 0.05 of it: C and A take turns, the rest by score.
    orders = [ids(reset_aware((A, B, C, D, E), by_id(MIXED), NOW, DEFAULT, n)) for n in range(3)]
    assert orders == [[3, 1, 5, 4, 2], [1, 3, 5, 4, 2], [3, 1, 5, 4, 2]]


def test_reset_aware_without_a_tie_band_is_plain_descending_score() -> None:
    config = ResetAwareConfig(tie_band_percent=0)
    for n in range(3):
        assert ids(reset_aware((A, B, C, D, E), by_id(MIXED), NOW, config, n)) == [3, 1, 5, 4, 2]


def test_reset_aware_with_a_wide_band_never_rotates_an_exhausted_account_in() -> None:
    wide = ResetAwareConfig(tie_band_percent=30)  # floor 0.2287: C, A, E, D take turns
    ordered = reset_aware((A, B, C, D, E), by_id(MIXED), NOW, wide, 1)
    assert ids(ordered) == [1, 5, 4, 3, 2]


def test_reset_aware_equal_scores_keep_declared_order_then_take_turns() -> None:
    same = by_id({1: FRESH, 2: FRESH, 3: FRESH})
    assert [ids(reset_aware((C, A, B), same, NOW, DEFAULT, n))[0] for n in range(4)] == [3, 1, 2, 3]
    everyone_out = by_id({i: snap(1.0, limit_reached=True) for i in (1, 2)})
    assert ids(reset_aware((A, B), everyone_out, NOW, DEFAULT, 1)) == [2, 1]


def test_reset_aware_looks_each_snapshot_up_once() -> None:
    calls: Counter[int] = Counter()

    def lookup(t: Target) -> QuotaSnapshot | None:
        calls[t.connection.id] += 1
        return MIXED.get(t.connection.id)

    reset_aware((A, B, C, D, E), lookup, NOW, DEFAULT, 0)
    assert calls == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1}


# -- reset-window ---------------------------------------------------------------------------------

WINDOWS = {
    1: snap(0.5, weekly=(0.5, NOW + 2 * HOUR)),  # 7 200 000 ms
    2: snap(0.5, weekly=(0.5, NOW + 600)),  # 600 000 ms: the soonest
    # 3: no snapshot: unknown
    4: snap(0.5, weekly=(0.5, NOW + 630)),  # 630 000 ms: within 60 s of the soonest
    5: snap(0.5, session=(0.5, NOW + 60)),  # no weekly window: unknown for "weekly"
}


def test_reset_window_puts_the_soonest_weekly_reset_first_and_rotates_near_ties() -> None:
    lookup = by_id(WINDOWS)
    assert ids(reset_window((A, B, C, D, E), lookup, NOW)) == [2, 4, 1, 3, 5]
    assert ids(reset_window((A, B, C, D, E), lookup, NOW, counter=1)) == [4, 2, 1, 3, 5]
    assert ids(reset_window((A, B, C, D, E), lookup, NOW, counter=2)) == [2, 4, 1, 3, 5]


@pytest.mark.parametrize("band", [0, -1, math.nan])
def test_reset_window_band_of_zero_or_less_turns_rotation_off(band: float) -> None:
    ordered = reset_window((A, B, C, D, E), by_id(WINDOWS), NOW, tie_band_ms=band, counter=1)
    assert ids(ordered) == [2, 4, 1, 3, 5]


def test_reset_window_takes_the_earliest_of_the_given_windows() -> None:
    lookup = by_id(WINDOWS)
    both = reset_window((A, B, C, D, E), lookup, NOW, windows=(SESSION, WEEKLY), counter=1)
    assert ids(both) == [5, 2, 4, 1, 3]  # E's session resets in 60 s, alone in its band
    # A band of 7 000 s takes in A (7 200 s, 6 600 s after B): B, D, A rotate by 4 mod 3 = 1.
    wider = reset_window((A, B, C, D, E), lookup, NOW, tie_band_ms=7_000_000, counter=4)
    assert ids(wider) == [4, 1, 2, 3, 5]


def test_reset_window_counts_a_past_reset_as_now_and_reads_monthly() -> None:
    lookup = by_id({1: snap(0.1, monthly=(0.1, NOW + DAY)), 2: snap(0.1, weekly=(0.1, NOW - 5))})
    ordered = reset_window((A, B), lookup, NOW, windows=(WEEKLY, MONTHLY), tie_band_ms=0)
    assert ids(ordered) == [2, 1]  # B's past reset counts 0 ms, A's month resets in a day


def test_reset_window_with_no_known_reset_keeps_the_declared_order() -> None:
    for n in range(3):
        assert reset_window((C, A, B), by_id({}), NOW, counter=n) == (C, A, B)


# -- headroom -------------------------------------------------------------------------------------


def test_headroom_descends_by_the_unused_share_of_the_fuller_window() -> None:
    lookup = by_id(
        {
            1: snap(0.5, session=(0.2, None), weekly=(0.5, None)),  # 0.5
            # 2: no snapshot: 1.0
            3: snap(0.9, session=(0.9, None)),  # 0.1
            4: snap(0.3, weekly=(30.0, None)),  # a percent: 0.7
            5: snap(None),  # no windows: 1.0
            6: snap(0.5, session=(None, None), weekly=(0.5, None)),  # 0.5, after A (stable)
        }
    )
    assert ids(headroom((A, B, C, D, E, F), lookup)) == [2, 5, 4, 1, 6, 3]


# -- every ordering is a permutation --------------------------------------------------------------

SIX = (A, B, C, D, E, F)
ORDERINGS: dict[str, Callable[[list[Target]], tuple[Target, ...]]] = {
    "reset_aware": lambda ts: reset_aware(ts, by_id(MIXED), NOW, DEFAULT, 7),
    "reset_window": lambda ts: reset_window(ts, by_id(WINDOWS), NOW, counter=3),
    "headroom": lambda ts: headroom(ts, by_id(MIXED)),
}


@pytest.mark.parametrize("name", sorted(ORDERINGS))
@pytest.mark.parametrize("size", [0, 1, 2, 6])
def test_every_quota_ordering_is_a_permutation_and_leaves_its_input_alone(
    name: str, size: int
) -> None:
    targets = list(SIX[:size])
    result = ORDERINGS[name](targets)
    assert isinstance(result, tuple)
    assert Counter(map(id, result)) == Counter(map(id, SIX[:size]))
    assert targets == list(SIX[:size])
