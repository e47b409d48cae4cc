"""The paired bench's arithmetic: round orders, medians, change, A/A noise, the reading against
a bar and the tables (no processes here)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from omniroute.tools.bench.pairing import (
    PairedRun,
    Sides,
    aa_noise,
    ceiling_table,
    cell_values,
    change_percent,
    halves_spread,
    main_table,
    median,
    others_table,
    ratios_table,
    reading,
    render,
    round_orders,
    serve_workers,
    twin_table,
)
from omniroute.tools.management.commands.benchpair import serve_options

LABELS = {"before": "before (aaa)", "after": "after (bbb)", "twin": "after′ (bbb)"}
WITH_TWIN = Sides("before", "after", "twin", LABELS)
WITHOUT_TWIN = Sides("before", "after", None, LABELS)
WITH_CEILING = Sides("before", "after", "twin", {**LABELS, "bare": "bare proxy (bbb)"}, "bare")


def runs_of(side: str, values: list[float], *, stream: bool = False) -> list[PairedRun]:
    return [
        PairedRun(side, stream, 1, n, 100, 0, value, 0.2, 0.3) for n, value in enumerate(values)
    ]


def test_two_sides_flip_every_round() -> None:
    assert round_orders(["a", "b"], 4) == [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")]


def test_three_sides_take_each_position_equally_over_six_rounds() -> None:
    orders = round_orders(["a", "b", "c"], 6)
    assert len(set(orders)) == 6
    for position in range(3):
        assert sorted(order[position] for order in orders) == ["a", "a", "b", "b", "c", "c"]


def test_four_sides_take_each_position_once_every_four_rounds() -> None:
    orders = round_orders(["a", "b", "c", "d"], 8)
    assert orders[:4] == orders[4:]
    for position in range(4):
        assert sorted(order[position] for order in orders[:4]) == ["a", "b", "c", "d"]


def test_median_and_change() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert median([]) == 0.0
    assert change_percent(2.0, 2.06) == pytest.approx(3.0)
    assert change_percent(2.0, 1.9) == pytest.approx(-5.0)
    assert change_percent(0.0, 1.0) == 0.0


def test_halves_spread_is_unsigned_and_needs_two_rounds() -> None:
    assert halves_spread([1.0, 1.0, 1.1, 1.1]) == pytest.approx(10.0)
    assert halves_spread([1.1, 1.1, 1.0, 1.0]) == pytest.approx(100 / 11)
    assert halves_spread([1.0]) == 0.0


def test_cell_values_follow_the_rounds_and_keep_cells_apart() -> None:
    runs = runs_of("after", [1.0, 2.0]) + runs_of("after", [9.0], stream=True)
    assert cell_values(list(reversed(runs)), "after", (False, 1)) == [1.0, 2.0]
    assert cell_values(runs, "after", (True, 1)) == [9.0]


def test_aa_noise_from_the_twin_or_from_the_halves() -> None:
    runs = (
        runs_of("before", [1.0, 1.0, 1.2, 1.2])
        + runs_of("after", [2.0, 2.0, 2.0, 2.0])
        + runs_of("twin", [1.9, 1.9, 1.9, 1.9])
    )
    assert aa_noise(runs, WITH_TWIN, (False, 1)) == pytest.approx(5.0)
    assert aa_noise(runs, WITHOUT_TWIN, (False, 1)) == pytest.approx(20.0)


@pytest.mark.parametrize(
    ("change", "noise", "expected"),
    [
        (2.9, 1.0, "within"),
        (-8.0, 1.0, "within"),
        (3.1, 1.0, "over"),
        (3.1, 4.0, "over (bar below noise: reported, not enforced)"),
        (1.0, 3.0, "within (bar below noise: reported, not enforced)"),
    ],
)
def test_reading(change: float, noise: float, expected: str) -> None:
    assert reading(change, noise, 3.0) == expected


def table_runs() -> list[PairedRun]:
    return (
        runs_of("before", [1.0, 2.0, 3.0])
        + runs_of("after", [1.0, 2.1, 3.0])
        + runs_of("twin", [2.15, 2.15, 2.15])
    )


def test_main_table_row() -> None:
    lines = main_table(table_runs(), WITH_TWIN, 3.0)
    assert lines[0].startswith("| mode, concurrency | before (aaa) | median | after (bbb) |")
    assert lines[2] == (
        "| non-stream, 1 | 1.00 · 2.00 · 3.00 | 2.000 | 1.00 · 2.10 · 3.00 | 2.100"
        " | +5.0 % | ±2.4 % | over |"
    )


def test_twin_and_others_tables() -> None:
    twin = twin_table(table_runs(), WITH_TWIN)
    assert twin[2].endswith("| 2.15 · 2.15 · 2.15 | 2.150 | +2.4 % |")
    assert twin_table(table_runs(), WITHOUT_TWIN) == []
    others = others_table(table_runs(), WITH_TWIN)
    assert others[2] == "| non-stream, 1 | before (aaa) | 0.200 | 0.300 | 100 | 0.000 | 0 |"
    assert len(others) == 2 + 3


def test_render_leaves_out_the_twin_table_without_a_twin() -> None:
    runs = runs_of("before", [1.0, 2.0]) + runs_of("after", [1.0, 2.0])
    assert "A/A pair" not in render(runs, WITHOUT_TWIN, 3.0)
    assert "A/A pair" in render(table_runs(), WITH_TWIN, 3.0)


def test_base_env_takes_name_value_pairs() -> None:
    with pytest.raises(CommandError, match="--base-env takes NAME=VALUE, not 'OMNIROUTE_X'"):
        call_command("benchpair", "--base", str(settings.BASE_DIR), "--base-env", "OMNIROUTE_X")


def ceiling_runs(
    side: str, requests: list[int], cpus: list[float], p50s: list[float]
) -> list[PairedRun]:
    return [
        PairedRun(side, False, 1, n, count, 0, cpu, 0.2, 0.3, p50)
        for n, (count, cpu, p50) in enumerate(zip(requests, cpus, p50s, strict=True))
    ]


def test_the_ceiling_table_sets_the_after_side_against_the_bare_proxy_by_medians() -> None:
    runs = (
        ceiling_runs("before", [900, 900, 900], [1.0, 1.0, 1.0], [1.3, 1.3, 1.3])
        + ceiling_runs("after", [950, 900, 850], [1.2, 1.5, 1.8], [1.2, 1.25, 1.3])
        + ceiling_runs("twin", [900, 900, 900], [1.5, 1.5, 1.5], [1.2, 1.2, 1.2])
        + ceiling_runs("bare", [990, 1000, 1200], [0.5, 0.6, 0.7], [1.1, 1.2, 1.0])
    )

    lines = ceiling_table(runs, WITH_CEILING)

    assert lines[2] == (
        "| non-stream, 1 | 900 | 1000 | 90 % | 1.500 | 0.600 | 2.50× | ±0.0 % | +0.150"
        " | req/s met, p50 missed |"
    )
    assert ceiling_table(runs, WITH_TWIN) == []
    others = others_table(runs, WITH_CEILING)
    assert len(others) == 2 + 4  # the bare proxy's own CPU row too
    assert others[3] == "| non-stream, 1 | after (bbb) | 0.200 | 0.300 | 900 | 1.250 | 0 |"
    assert "Against the ceiling" in render(runs, WITH_CEILING, 3.0)
    assert "Against the ceiling" not in render(runs, WITH_TWIN, 3.0)


def timed_runs(side: str, requests: list[int], cpus: list[float]) -> list[PairedRun]:
    """Runs of two seconds each, so requests/s is half the request count."""
    return [
        PairedRun(side, False, 16, n, count, 0, cpu, 0.2, 0.3, 1.0, 2.0)
        for n, (count, cpu) in enumerate(zip(requests, cpus, strict=True))
    ]


WORKERS = Sides("before", "after", "twin", LABELS, None, ratios=True, ratio_limit=1.1)


def test_the_ratios_table_sets_before_over_after_by_medians_against_the_limit() -> None:
    runs = (
        timed_runs("before", [1800, 2000, 2200], [1.0, 1.2, 1.4])
        + timed_runs("after", [1000, 1000, 1000], [1.0, 1.0, 1.0])
        + timed_runs("twin", [1000, 1000, 1000], [1.01, 1.01, 1.01])
    )

    lines = ratios_table(runs, WORKERS)

    assert lines[0].count("|") == lines[1].count("|") == 11
    assert "within 1.1×?" in lines[0]
    assert lines[2] == (
        "| non-stream, 16 | 1.200 | 1.000 | 1.20× | ±1.0 % | over | 1000 | 500 | 2.00×"
        " | 0.200 · 0.200 |"
    )
    assert ratios_table(runs, WITH_TWIN) == []
    assert "over after (bbb), medians" in render(runs, WORKERS, 3.0)
    assert "medians: CPU per" not in render(runs, WITH_TWIN, 3.0)


def test_the_ratio_is_read_only_against_a_limit_and_not_enforced_under_the_noise() -> None:
    runs = (
        timed_runs("before", [1000], [1.05])
        + timed_runs("after", [1000], [1.0])
        + timed_runs("twin", [1000], [1.2])
    )
    no_limit = Sides("before", "after", "twin", LABELS, None, ratios=True)

    assert "| A/A noise | bar |" in ratios_table(runs, no_limit)[0]
    assert ratios_table(runs, no_limit)[2].split(" | ")[5] == "—"
    assert ratios_table(runs, WORKERS)[2].split(" | ")[5] == (
        "within (bar below noise: reported, not enforced)"
    )


@pytest.mark.parametrize(
    ("options", "workers"),
    [
        ([], 1),
        (["--server", "uvicorn"], 1),
        (["--workers", "2"], 2),
        (["--server", "uvicorn", "--workers=4"], 4),
        (["--workers"], 1),
        (["--workers", "two"], 1),
    ],
)
def test_serve_workers_reads_the_worker_count(options: list[str], workers: int) -> None:
    assert serve_workers(options) == workers


def test_base_serve_splits_like_a_shell_and_several_workers_need_shared_state() -> None:
    assert serve_options("--server uvicorn  --workers '1'", shared_state=False) == [
        "--server",
        "uvicorn",
        "--workers",
        "1",
    ]
    assert serve_options("--workers 2", shared_state=True) == ["--workers", "2"]
    with pytest.raises(CommandError, match="needs --shared-state"):
        call_command("benchpair", "--base", str(settings.BASE_DIR), "--base-serve", "--workers 2")
    with pytest.raises(CommandError, match="bad --base-serve"):
        serve_options("--server 'uvicorn", shared_state=False)
