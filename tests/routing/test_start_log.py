"""The shared start log (pure): at most ``per_minute`` starts in any sliding 60 s, a record
that stays small at any rate, and the spacing kept past the window."""

from __future__ import annotations

from bisect import bisect_right

from routing.domain.attempts.start_log import MERGE_SECONDS, WINDOW_SECONDS, Entry, decide


def drive(per_minute: int, step: float, seconds: float) -> tuple[list[float], int]:
    """Try a start every ``step`` seconds; return the granted start times and the longest
    log."""
    log: list[Entry] = []
    granted: list[float] = []
    longest = 0
    for i in range(int(seconds / step)):
        now = i * step
        decision = decide(log, now, per_minute=per_minute, min_time_seconds=0.0)
        log = decision.log
        longest = max(longest, len(log))
        if decision.wait == 0:
            granted.append(now)
    return granted, longest


def most_in_a_window(starts: list[float]) -> int:
    return max(bisect_right(starts, t + WINDOW_SECONDS - 1e-9) - i for i, t in enumerate(starts))


def test_no_sliding_minute_holds_more_than_the_rate() -> None:
    granted, _ = drive(per_minute=50, step=0.7, seconds=300)

    assert most_in_a_window(granted) <= 50
    assert len(granted) >= 4 * 50  # five minutes: the rate is reached, not starved


def test_the_log_stays_small_at_a_high_rate() -> None:
    granted, longest = drive(per_minute=100_000, step=0.01, seconds=120)

    assert most_in_a_window(granted) <= 100_000
    assert longest <= WINDOW_SECONDS / MERGE_SECONDS + 2


def test_the_spacing_outlives_the_window() -> None:
    first = decide(None, 0.0, per_minute=0, min_time_seconds=90.0)
    assert first.wait == 0
    past_the_window = decide(first.log, 70.0, per_minute=0, min_time_seconds=90.0)
    later = decide(past_the_window.log, 80.0, per_minute=0, min_time_seconds=90.0)

    assert (past_the_window.wait, later.wait) == (20.0, 10.0)
