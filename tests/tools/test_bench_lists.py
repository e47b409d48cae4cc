"""The bench's lists phase: its verdict against the 50 ms bar, and one real run at a small
size in a child process with its own database (no timing asserted)."""

from __future__ import annotations

from pathlib import Path

from omniroute.tools.bench import lists
from omniroute.tools.bench.report import PhaseReport, render


def figure(median_ms: float, count: int = 5000) -> dict[str, float | int]:
    return {"count": count, "median_ms": median_ms, "worst_ms": median_ms * 2, "queries": 3}


def test_a_list_over_the_bar_is_named() -> None:
    report = lists.report(
        {"first page": figure(12.5), "state=cooling": figure(480.0, 250)}, 5000, 15
    )
    assert "| state=cooling | 250 | 480.0 | 960.0 | 3 |" in report.table
    assert report.summary[-1] == "over the 50 ms bar (medians): state=cooling"


def test_every_list_under_the_bar_says_so() -> None:
    report = lists.report({"first page": figure(12.5), "search": figure(50.0, 1)}, 5000, 15)
    assert report.summary[-1] == "every list under the 50 ms bar (medians)"


def test_render_without_a_gateway_has_no_rss_line() -> None:
    body = render([PhaseReport("lists", "| t |", ("s",))], None)
    assert "peak RSS" not in body


def test_the_phase_seeds_its_own_database_and_times_every_list() -> None:
    report = lists.run(60, 2)
    rows = {line.split(" | ")[0].strip("| ") for line in report.table.splitlines()[2:]}
    assert rows == set(lists.queries(60))
    assert "| first page | 60 |" in report.table
    assert "| search | 1 |" in report.table
    assert "| state=cooling | 3 |" in report.table  # one in 20 is cooling
    assert not list(Path(lists.tempfile.gettempdir()).glob("omniroute-bench-lists-*"))
