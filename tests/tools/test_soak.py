"""The soak's arithmetic and verdict (``omniroute.tools.soak``): the growth fit, the failures, the
report section. The run itself is ``make soak``; nothing here starts a process or reads a clock."""

from __future__ import annotations

import pytest

from omniroute.tools.soak import (
    LogOutcome,
    Loop,
    SoakPlan,
    SoakResult,
    replace_section,
    section,
    slope_per_minute,
)

PLAN = SoakPlan(duration=60, warm_up=10, bound_mib_per_minute=2.0)


# All 400 answered requests written; the table pruned to its bound.
LOGGED = LogOutcome(written=400, dropped=0, rows=PLAN.log_max_rows)


def result(
    samples: list[tuple[float, float]], errors: int = 0, log: LogOutcome | None = LOGGED
) -> SoakResult:
    loops = (Loop(stream=True, answered=100, errors=errors), Loop(False, 300, 0))
    return SoakResult(PLAN, loops, 60.0, tuple(samples), peak_mib=130.0, log=log)


@pytest.mark.parametrize(
    ("samples", "per_minute"),
    [
        ([(0, 100.0), (60, 101.0)], 1.0),
        ([(t, 100.0 + t / 30) for t in range(0, 61, 5)], 2.0),  # exactly on a line
        ([(0, 100.0), (30, 103.0), (60, 100.0)], 0.0),  # up and back: no trend
        ([(0, 100.0)], 0.0),
        ([(5, 100.0), (5, 104.0)], 0.0),  # no spread in time
    ],
)
def test_the_growth_is_the_least_squares_slope_per_minute(
    samples: list[tuple[float, float]], per_minute: float
) -> None:
    assert slope_per_minute(samples) == pytest.approx(per_minute)


def test_samples_before_the_warm_up_are_left_out_of_the_fit() -> None:
    # the start-up climb (100 → 120 MiB in the warm-up) does not count; a flat plateau after it
    soaked = result([(0, 100.0), (5, 120.0), (10, 125.0), (30, 125.0), (60, 125.0)])
    assert soaked.growth_mib_per_minute == pytest.approx(0.0)
    assert soaked.failures() == []


def test_growth_past_the_bound_or_any_failed_request_fails_the_run() -> None:
    leaking = result([(t, 120.0 + t / 20) for t in range(10, 61)])  # 3 MiB/min
    assert leaking.failures() == ["RSS grew 3.00 MiB/min, above 2"]
    assert result([(10, 120.0), (60, 120.0)], errors=2).failures() == ["2 request(s) failed"]
    assert result([(10, 120.0)]).failures() == ["fewer than two samples after the warm-up"]


@pytest.mark.parametrize(
    ("log", "failure"),
    [
        (LogOutcome(written=397, dropped=0, rows=397), "3 answered request(s) never reached"),
        (LogOutcome(written=390, dropped=10, rows=390), "dropped 10 record(s)"),
        (LogOutcome(written=400, dropped=0, rows=PLAN.log_max_rows + 1), "above its bound"),
        (None, "the request log was not read"),
    ],
)
def test_a_request_missing_from_the_log_or_a_table_past_its_bound_fails_the_run(
    log: LogOutcome | None, failure: str
) -> None:
    failures = result([(10, 120.0), (60, 120.0)], log=log).failures()
    assert len(failures) == 1 and failure in failures[0]


def test_the_section_replaces_its_block_and_keeps_what_follows() -> None:
    block = section(result([(10, 120.0), (60, 120.0)]), "2026-12-02", "2026-12-02 09:00 UTC")
    title = "## 2026-12-02 — soak and memory bounds"
    assert block.startswith(title + "\n") and "| pass |" in block
    assert f"| 400 / 0 | {PLAN.log_max_rows} ({PLAN.log_max_rows}) |" in block
    document = f"# Benchmarks\n\n{title}\n\nold figures\n\n### By hand\n\nkept\n"

    replaced = replace_section(document, block)

    assert "old figures" not in replaced and replaced.count(title) == 1
    assert replaced.endswith("### By hand\n\nkept\n")
    assert replace_section("# Benchmarks\n", block) == "# Benchmarks\n\n" + block
