"""The base phase's ceiling table: each gateway run against the bare proxy's run of the same
mode and concurrency, the ratios and the bars as given numbers make them (pure)."""

from __future__ import annotations

import pytest

from omniroute.tools.bench.base import BARE, GATEWAY, ceiling_pairs
from omniroute.tools.bench.report import (
    CEILING_HEADER,
    ceiling_bars,
    ceiling_row,
    ceiling_table,
    median_run,
)
from omniroute.tools.loadgen import RunResult

SECONDS = 5.0


def run(
    label: str,
    rps: float,
    p50: float,
    cpu: float | None,
    *,
    concurrency: int = 1,
    stream: bool = False,
    loadgen: float | None = None,
    upstream: float | None = None,
) -> RunResult:
    return RunResult(
        label,
        stream,
        concurrency,
        round(rps * SECONDS),
        0,
        SECONDS,
        p50,
        p50 * 2,
        p50,
        cpu,
        loadgen_cpu_ms_per_request=loadgen,
        upstream_cpu_ms_per_request=upstream,
    )


def test_a_row_gives_the_rate_and_cpu_ratios_the_p50_difference_and_the_others_cpu() -> None:
    gateway = run(GATEWAY, 1800, 1.25, 0.6, loadgen=0.21, upstream=0.105)
    bare = run(BARE, 2000, 1.2, 0.4, loadgen=0.2, upstream=0.1)

    assert ceiling_row(gateway, bare) == (
        "| non-stream | 1 | 1800 | 2000 | 90 % | 0.600 | 0.400 | 1.50× | +0.050"
        " | 0.210 · 0.200 | 0.105 · 0.100 | req/s met, p50 met |"
    )


def test_a_slower_gateway_misses_the_bars_and_the_p50_bar_is_read_at_one_client_only() -> None:
    bare = run(BARE, 2000, 1.0, 0.4)

    assert ceiling_bars(run(GATEWAY, 1780, 1.2, 0.6), bare) == "req/s missed, p50 missed"
    sixteen = run(GATEWAY, 1780, 9.0, 0.6, concurrency=16)
    assert ceiling_bars(sixteen, run(BARE, 2000, 1.0, 0.4, concurrency=16)) == "req/s missed"


def test_a_figure_missing_on_either_side_shows_as_a_dash_and_leaves_its_ratio_out() -> None:
    row = ceiling_row(run(GATEWAY, 100, 2.0, 0.5), run(BARE, 200, 1.5, None))

    assert row == (
        "| non-stream | 1 | 100 | 200 | 50 % | 0.500 | — | — | +0.500 | — · — | — · — "
        "| req/s missed, p50 missed |"
    )


def test_each_gateway_run_is_paired_with_the_bare_proxys_run_of_its_mode_and_concurrency() -> None:
    results = [
        run("direct", 5000, 0.2, None),
        bare_one := run(BARE, 2000, 1.0, 0.4),
        gateway_one := run(GATEWAY, 1900, 1.05, 0.5),
        run("gateway-failover", 900, 2.0, 1.0),
        bare_streams := run(BARE, 300, 20.0, 1.0, stream=True, concurrency=16),
        gateway_streams := run(GATEWAY, 290, 21.0, 1.2, stream=True, concurrency=16),
        run(GATEWAY, 280, 30.0, 1.2, stream=True, concurrency=64),  # no bare run: no pair
    ]

    assert ceiling_pairs(results) == [(gateway_one, bare_one), (gateway_streams, bare_streams)]


def test_the_table_names_its_bars_and_has_one_row_per_pair() -> None:
    pairs = [(run(GATEWAY, 1900, 1.05, 0.5), run(BARE, 2000, 1.0, 0.4))]

    text = ceiling_table(pairs)

    assert "gateway req/s ≥ 90 % of the bare proxy's" in text
    assert "+ 0.1 ms" in text
    assert text.endswith(f"{CEILING_HEADER}\n{ceiling_row(*pairs[0])}")


def test_repeated_runs_keep_the_median_cpu_of_the_load_generator_and_the_upstream() -> None:
    runs = [
        run(GATEWAY, 100, 1.0, 0.5, loadgen=0.3, upstream=0.2),
        run(GATEWAY, 100, 1.0, 0.5, loadgen=0.1, upstream=None),
        run(GATEWAY, 100, 1.0, 0.5, loadgen=0.2, upstream=0.5),
    ]

    row = median_run(runs)

    assert row.loadgen_cpu_ms_per_request == 0.2
    assert row.upstream_cpu_ms_per_request == pytest.approx(0.35)  # of the two measured
