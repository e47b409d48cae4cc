"""The summary lines ``manage.py bench`` prints for its combo scenario (pure)."""

from __future__ import annotations

from omniroute.tools.bench.report import combo_line
from omniroute.tools.loadgen import RunResult


def run(label: str, p50: float, ttfb: float, cpu: float | None, **upstream: int) -> RunResult:
    return RunResult(label, False, 16, 1000, 0, 5.0, p50, p50 * 2, ttfb, cpu, **upstream)


def test_the_combo_line_compares_with_direct_then_with_the_single_model_row() -> None:
    direct = run("direct", 1.50, 1.40, None)
    gateway = run("gateway", 11.00, 10.90, 0.80)
    combo = run("gateway-combo", 12.25, 12.00, 1.05, upstream_calls=1010, upstream_failed=10)

    line = combo_line(direct, gateway, combo)

    assert line == (
        "combo non-stream c=16: added p50 10.75 ms, added TTFB 10.60 ms, gateway CPU 1.05"
        " ms/request; over the single-model row: p50 +1.25 ms, CPU +0.25 ms/request;"
        " upstream calls/request 1.01 (10 of 1010 calls failed)"
    )
