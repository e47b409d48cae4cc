"""The ``auto`` strategy's exclusion records:
a score below 0.2 excludes, progressively longer on repeats, never past the cap on self-set
timers; an expired exclusion waits for new evidence before it excludes again."""

from __future__ import annotations

import pytest

from routing.strategies.auto.exclusion import (
    ExclusionPolicy,
    ExclusionRecord,
    after_score,
    capped_policy,
    is_excluded,
)

NOW = 1_700_000_000.0
REFERENCE = ExclusionPolicy()  # 5 min doubling to 30 min: what the reference does
POOR, FINE = 0.19, 0.2


@pytest.mark.parametrize(
    ("level", "seconds"), [(0, 300), (1, 600), (2, 1200), (3, 1800), (9, 1800)]
)
def test_the_reference_durations_double_up_to_30_minutes(level: int, seconds: float) -> None:
    assert REFERENCE.duration(level) == seconds


@pytest.mark.parametrize(
    ("cap_seconds", "base", "most"),
    [(30.0, 30.0, 30.0), (120.0, 120.0, 120.0), (600.0, 300.0, 600.0), (3600.0, 300.0, 1800.0)],
)
def test_decision_16_caps_both_durations(cap_seconds: float, base: float, most: float) -> None:
    policy = capped_policy(cap_seconds)
    assert (policy.base_seconds, policy.max_seconds) == (base, most)
    assert all(policy.duration(level) <= cap_seconds for level in range(70))


def test_a_policy_refuses_durations_out_of_order() -> None:
    with pytest.raises(ValueError):
        ExclusionPolicy(base_seconds=60, max_seconds=30)
    with pytest.raises(ValueError):
        ExclusionPolicy(base_seconds=0)


def test_a_fine_score_keeps_no_record_and_a_poor_one_excludes_at_level_0() -> None:
    assert after_score(None, FINE, 7, NOW, REFERENCE) is None
    assert after_score(None, POOR, 7, NOW, REFERENCE) == ExclusionRecord(NOW + 300, 0, 7)


def test_an_exclusion_runs_its_course_whatever_the_score() -> None:
    record = ExclusionRecord(NOW + 300, 0, 7)
    for score in (0.0, 0.9):
        assert after_score(record, score, 9, NOW + 299.9, REFERENCE) is record
    assert is_excluded(record, NOW + 299.9)
    assert not is_excluded(record, NOW + 300)
    assert not is_excluded(None, NOW)


def test_an_expired_exclusion_is_cleared_by_a_fine_score() -> None:
    record = ExclusionRecord(NOW + 300, 2, 7)
    assert after_score(record, FINE, 8, NOW + 300, REFERENCE) is None


def test_an_expired_exclusion_waits_for_a_probe_before_excluding_again() -> None:
    """Nothing changed while the target was out: the same evidence must not exclude it again,
    or it could never come back (it waits for a probe)."""
    record = ExclusionRecord(NOW + 300, 0, 7)
    assert after_score(record, POOR, 7, NOW + 400, REFERENCE) is record
    assert not is_excluded(record, NOW + 400)


def test_repeats_on_new_evidence_double_up_to_the_maximum() -> None:
    # given
    clock, evidence = NOW, 1
    record = after_score(None, POOR, evidence, clock, REFERENCE)
    lengths = []
    # when
    for _ in range(5):
        assert record is not None
        lengths.append(record.until - clock)
        clock, evidence = record.until, evidence + 1  # it expired, then a probe failed
        record = after_score(record, POOR, evidence, clock, REFERENCE)
    # then
    assert lengths == [300, 600, 1200, 1800, 1800]


def test_with_the_default_cap_every_exclusion_lasts_30_seconds() -> None:
    policy = capped_policy(30.0)
    record = after_score(None, POOR, 1, NOW, policy)
    assert record == ExclusionRecord(NOW + 30, 0, 1)
    again = after_score(record, POOR, 2, NOW + 30, policy)
    assert again == ExclusionRecord(NOW + 60, 1, 2)


def test_the_threshold_is_a_parameter() -> None:
    strict = ExclusionPolicy(threshold=0.5)
    assert after_score(None, 0.49, 1, NOW, strict) is not None
    assert after_score(None, 0.5, 1, NOW, strict) is None


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "x",
        3,
        {},
        {"until": "soon"},
        {"until": True},
        {"until": 1.0, "level": -1},
        {"until": float("nan")},
        {"until": 1.0, "evidence": 2.5},
    ],
)
def test_garbage_in_the_store_is_no_record(stored: object) -> None:
    assert ExclusionRecord.from_dict(stored) is None


def test_a_record_round_trips_through_its_dict() -> None:
    record = ExclusionRecord(NOW + 30.5, 3, 12)
    assert ExclusionRecord.from_dict(record.to_dict()) == record
    assert ExclusionRecord.from_dict({"until": 5}) == ExclusionRecord(5.0, 0, 0)
