"""Quota snapshots read from upstream rate-limit headers, and their state-store records (pure).
``NOW`` is 2023-11-14T22:13:20Z."""

from __future__ import annotations

import json

import pytest

from routing.domain.quota.snapshots import (
    SESSION,
    WEEKLY,
    QuotaSnapshot,
    QuotaWindow,
    quota_key,
    snapshot_from_headers,
    used_fraction,
)

NOW = 1_700_000_000.0
Figures = tuple[float | None, float | None]


def figures(window: QuotaWindow) -> Figures:
    """A window's (used fraction rounded to 9 places, reset), to compare with exact literals."""
    used = window.percent_used
    return (None if used is None else round(used, 9), window.reset_at)


def all_figures(snapshot: QuotaSnapshot | None) -> tuple[Figures, bool, dict[str, Figures]]:
    """The overall figures, the limit flag and every window's figures of ``snapshot``."""
    assert snapshot is not None
    assert snapshot.taken_at == NOW
    overall = figures(QuotaWindow(snapshot.percent_used, snapshot.reset_at))
    windows = {name: figures(window) for name, window in snapshot.windows.items()}
    return overall, snapshot.limit_reached, windows


def openai_headers(kind: str, limit: str, remaining: str, reset: str) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{kind}": limit,
        f"x-ratelimit-remaining-{kind}": remaining,
        f"x-ratelimit-reset-{kind}": reset,
    }


def test_openai_headers_give_a_window_per_kind_and_the_fullest_one_overall() -> None:
    headers = {
        **openai_headers("requests", "60", "45", "1s"),
        **openai_headers("tokens", "150000", "30000", "6m0s"),
    }
    assert all_figures(snapshot_from_headers(headers, NOW)) == (
        (0.8, NOW + 360),
        False,
        {"requests": (0.25, NOW + 1), "tokens": (0.8, NOW + 360)},
    )


@pytest.mark.parametrize(
    ("reset", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("2h", 7200.0),
        ("1m30s", 90.0),
        ("30", 30.0),
        ("0.5", 0.5),
        (" 12s ", 12.0),
    ],
)
def test_openai_resets_are_durations_from_now(reset: str, seconds: float) -> None:
    snapshot = snapshot_from_headers(openai_headers("requests", "10", "5", reset), NOW)
    assert snapshot is not None
    assert snapshot.windows["requests"].reset_at == pytest.approx(NOW + seconds)


@pytest.mark.parametrize("reset", ["soon", "-5", "", "1x", "s", "1h-2m", "nan", "inf"])
def test_an_unparseable_openai_reset_is_left_out(reset: str) -> None:
    snapshot = snapshot_from_headers(openai_headers("tokens", "100", "40", reset), NOW)
    assert snapshot is not None
    assert figures(snapshot.windows["tokens"]) == (0.6, None)
    assert snapshot.reset_at is None


def test_nothing_remaining_means_the_limit_is_reached() -> None:
    headers = {
        **openai_headers("requests", "60", "0", "20s"),
        **openai_headers("tokens", "1000", "900", "1s"),
    }
    snapshot = snapshot_from_headers(headers, NOW)
    assert snapshot is not None
    assert snapshot.limit_reached
    assert snapshot.percent_used == 1.0
    assert snapshot.reset_at == pytest.approx(NOW + 20)
    # Only "remaining: 0", no limit: still exhausted, and fully used.
    alone = snapshot_from_headers({"x-ratelimit-remaining-tokens": "0"}, NOW)
    assert alone is not None
    assert alone.limit_reached
    assert alone.windows["tokens"] == QuotaWindow(1.0, None)


def test_anthropic_headers_read_rfc3339_resets_and_drop_past_ones() -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "10",
        "anthropic-ratelimit-requests-reset": "2023-11-14T22:14:20Z",  # NOW + 60 s
        "anthropic-ratelimit-tokens-limit": "100000",
        "anthropic-ratelimit-tokens-remaining": "50000",
        "anthropic-ratelimit-tokens-reset": "2023-11-14T23:13:20+01:00",  # NOW + 0: kept
        "anthropic-ratelimit-input-tokens-limit": "80000",
        "anthropic-ratelimit-input-tokens-remaining": "80000",
        "anthropic-ratelimit-input-tokens-reset": "2023-11-14T22:00:00Z",  # past: dropped
        "anthropic-ratelimit-output-tokens-limit": "20000",
        "anthropic-ratelimit-output-tokens-remaining": "15000",
        "anthropic-ratelimit-output-tokens-reset": "tomorrow",  # unparseable: dropped
    }
    assert all_figures(snapshot_from_headers(headers, NOW)) == (
        (0.8, NOW + 60),
        False,
        {
            "requests": (0.8, NOW + 60),
            "tokens": (0.5, NOW),
            "input-tokens": (0.0, None),
            "output-tokens": (0.25, None),
        },
    )


def test_anthropic_unified_headers_give_the_session_and_weekly_windows() -> None:
    headers = {
        "anthropic-ratelimit-unified-status": "allowed",
        "anthropic-ratelimit-unified-5h-utilization": "0.42",
        "anthropic-ratelimit-unified-5h-reset": str(int(NOW) + 3600),  # epoch seconds
        "anthropic-ratelimit-unified-7d-utilization": "73",  # above 1: a percent
        "anthropic-ratelimit-unified-7d-reset": str(int(NOW * 1000) + 86_400_000),  # epoch ms
    }
    assert all_figures(snapshot_from_headers(headers, NOW)) == (
        (0.73, NOW + 86_400),
        False,
        {SESSION: (0.42, NOW + 3600), WEEKLY: (0.73, NOW + 86_400)},
    )


def test_anthropic_unified_resets_may_be_iso_and_past_ones_are_dropped() -> None:
    headers = {
        "anthropic-ratelimit-unified-5h-utilization": "0.9",
        "anthropic-ratelimit-unified-5h-reset": str(int(NOW) - 1),
        "anthropic-ratelimit-unified-7d-reset": "2023-11-15T22:13:20Z",
    }
    assert all_figures(snapshot_from_headers(headers, NOW)) == (
        (0.9, None),
        False,
        {SESSION: (0.9, None), WEEKLY: (None, NOW + 86_400)},
    )


def test_a_rejected_unified_status_alone_is_a_reached_limit() -> None:
    snapshot = snapshot_from_headers({"anthropic-ratelimit-unified-status": "rejected"}, NOW)
    assert snapshot == QuotaSnapshot(None, None, True, {}, NOW)


@pytest.mark.parametrize(
    ("utilization", "expected"),
    [("0", 0.0), ("1", 1.0), ("0.5", 0.5), ("50", 0.5), ("150", 1.0), ("-0.2", 0.0)],
)
def test_unified_utilization_is_a_fraction_or_a_percent_clamped(
    utilization: str, expected: float
) -> None:
    headers = {"anthropic-ratelimit-unified-7d-utilization": utilization}
    snapshot = snapshot_from_headers(headers, NOW)
    assert snapshot is not None
    assert snapshot.windows[WEEKLY].percent_used == pytest.approx(expected)


def test_more_remaining_than_the_limit_clamps_to_nothing_used() -> None:
    snapshot = snapshot_from_headers(openai_headers("requests", "10", "20", "1s"), NOW)
    assert snapshot is not None
    assert snapshot.percent_used == 0.0


def test_header_names_are_matched_whatever_their_case() -> None:
    snapshot = snapshot_from_headers({"X-RateLimit-Remaining-Requests": "0"}, NOW)
    assert snapshot is not None
    assert snapshot.limit_reached


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content-type": "application/json", "x-ratelimit-reset": "1700000100"},
        {"x-ratelimit-limit-requests": "lots", "x-ratelimit-reset-requests": "later"},
        {"anthropic-ratelimit-unified-status": "allowed"},
        {"anthropic-ratelimit-unified-5h-utilization": "high"},
    ],
)
def test_headers_without_a_usable_rate_limit_give_no_snapshot(headers: dict[str, str]) -> None:
    assert snapshot_from_headers(headers, NOW) is None


def test_a_snapshot_round_trips_through_json() -> None:
    headers = {
        **openai_headers("tokens", "100", "10", "1m"),
        "anthropic-ratelimit-unified-5h-utilization": "0.3",
    }
    snapshot = snapshot_from_headers(headers, NOW)
    assert snapshot is not None
    record = json.loads(json.dumps(snapshot.to_record()))
    assert record["windows"]["tokens"]["reset_at"] == NOW + 60
    assert record["windows"]["tokens"]["percent_used"] == pytest.approx(0.9)
    assert QuotaSnapshot.from_record(record) == snapshot


@pytest.mark.parametrize(
    "record",
    [None, 5, "snapshot", [], {}, {"taken_at": "soon"}, {"taken_at": True}, {"taken_at": None}],
)
def test_a_garbage_record_reads_as_no_snapshot(record: object) -> None:
    assert QuotaSnapshot.from_record(record) is None


def test_a_damaged_record_keeps_what_it_can() -> None:
    record = {
        "taken_at": NOW,
        "percent_used": "lots",
        "reset_at": float("nan"),
        "limit_reached": "yes",
        "windows": {"weekly": {"percent_used": 80, "reset_at": "x"}, "bad": 3, "big": {}},
    }
    assert QuotaSnapshot.from_record(record) == QuotaSnapshot(
        percent_used=None,
        reset_at=None,
        limit_reached=False,
        windows={"weekly": QuotaWindow(0.8, None), "big": QuotaWindow(None, None)},
        taken_at=NOW,
    )
    assert QuotaSnapshot.from_record({"taken_at": 1, "percent_used": 10**400}) == QuotaSnapshot(
        None, None, False, {}, 1.0
    )


def test_a_snapshot_is_immutable_and_hashable() -> None:
    windows = {WEEKLY: QuotaWindow(0.5, None)}
    snapshot = QuotaSnapshot(0.5, None, False, windows, NOW)
    windows[SESSION] = QuotaWindow(1.0, None)  # the caller's dict, not the snapshot's
    assert set(snapshot.windows) == {WEEKLY}
    with pytest.raises(TypeError):
        snapshot.windows[SESSION] = QuotaWindow(1.0, None)  # type: ignore[index]
    assert hash(snapshot) == hash(QuotaSnapshot(0.5, None, False, {}, NOW))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.25, 0.25), ("0.25", 0.25), (25, 0.25), (1, 1.0), (250, 1.0), (-1, 0.0), (True, None)],
)
def test_used_fraction_reads_percents_above_one(value: object, expected: float | None) -> None:
    assert used_fraction(value) == (None if expected is None else pytest.approx(expected))


def test_quota_key_names_the_connection() -> None:
    assert quota_key(7) == "quota-snapshot:7"


def test_as_of_frees_the_windows_whose_reset_has_passed() -> None:
    windows = {"session": QuotaWindow(1.0, 100.0), "weekly": QuotaWindow(0.4, 900.0)}
    snapshot = QuotaSnapshot(1.0, 100.0, True, windows, taken_at=50.0)
    assert snapshot.as_of(99.0) is snapshot
    later = snapshot.as_of(100.0)
    assert later.windows["session"] == QuotaWindow(0.0, None)
    assert later.percent_used == 0.4 and later.reset_at == 900.0
    assert later.limit_reached is False and later.taken_at == 50.0


def test_as_of_keeps_the_limit_while_a_window_is_still_full() -> None:
    windows = {"session": QuotaWindow(0.2, 100.0), "weekly": QuotaWindow(1.0, 900.0)}
    later = QuotaSnapshot(1.0, 900.0, True, windows, taken_at=50.0).as_of(200.0)
    assert later.limit_reached is True and later.percent_used == 1.0
