"""The bench's pure helpers: medians of repeated runs, the scale, prompt and sweep lines, the
decision-header probe's parsing and the recorded section (no timing here)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from omniroute.tools.bench.prompt import conversation, prompt_text, size_label
from omniroute.tools.bench.report import (
    PhaseReport,
    median_run,
    over_line,
    prompt_line,
    render,
    section,
    sweep_line,
    sweep_row,
)
from omniroute.tools.bench.scale import decision_connection, distinct_connections
from omniroute.tools.loadgen import RunResult


def run(
    label: str,
    p50: float,
    cpu: float | None,
    *,
    rps: float = 200.0,
    concurrency: int = 1,
    stream: bool = False,
    errors: int = 0,
    peers: int | None = None,
) -> RunResult:
    return RunResult(
        label,
        stream,
        concurrency,
        int(rps * 5),
        errors,
        5.0,
        p50,
        p50 * 3,
        p50 * 0.9,
        cpu,
        upstream_peers=peers,
    )


def test_the_median_of_repeated_runs_takes_each_figure_apart_and_sums_the_errors() -> None:
    runs = [
        run("scale-1", 2.0, 1.5, rps=100, errors=1),
        run("scale-1", 1.0, 0.9, rps=300),
        run("scale-1", 3.0, 1.1, rps=200, errors=2),
    ]

    row = median_run(runs)

    assert (row.p50_ms, row.p99_ms, row.cpu_ms_per_request) == (2.0, 6.0, 1.1)
    assert row.rps == pytest.approx(200.0)
    assert (row.errors, row.seconds, row.label) == (3, 15.0, "scale-1")


def test_one_run_is_its_own_median() -> None:
    only = run("gateway", 1.0, 0.8)

    assert median_run([only]) is only


def test_a_direct_run_keeps_no_cpu_in_its_median() -> None:
    assert (
        median_run([run("direct", 1.0, None), run("direct", 2.0, None)]).cpu_ms_per_request is None
    )


def test_the_scale_line_compares_with_the_one_connection_row() -> None:
    one = run("scale-1", 1.20, 0.90, rps=700)
    many = run("scale-100", 1.45, 1.05, rps=650)

    assert over_line("scale-100", one, many) == (
        "scale-100 non-stream c=1 over scale-1: p50 +0.25 ms, p99 +0.75 ms,"
        " gateway CPU +0.15 ms/request (1.05 vs 0.90), req/s 650 vs 700"
    )


def test_the_prompt_line_sets_the_large_prompt_beside_the_small_one() -> None:
    small = (run("direct", 0.40, None), run("gateway", 1.20, 0.90))
    big = (run("direct-1MB", 3.00, None), run("gateway-1MB", 9.50, 6.40))

    assert prompt_line(small, big) == (
        "gateway-1MB non-stream c=1: added p50 over direct 6.50 ms (small prompt 0.80 ms),"
        " gateway CPU 6.40 ms/request (small prompt 0.90, so +5.50 ms for the body);"
        " direct p50 3.00 ms (small prompt 0.40)"
    )


def test_the_sweep_line_names_the_peak_and_the_top_level() -> None:
    runs = [
        run("gateway", 1.0, 1.2, rps=700, concurrency=1),
        run("gateway", 20.0, 0.8, rps=1300, concurrency=64),
        run("gateway", 90.0, 0.9, rps=1100, concurrency=256, errors=2),
    ]

    assert sweep_line(runs) == (
        "sweep non-stream: peak 1300 req/s at c=64; at c=256 1100 req/s, p50 90.00 ms,"
        " p99 270.00 ms, gateway CPU 0.90 ms/request, 2 errors over the sweep"
    )
    assert (
        sweep_row(runs[2]) == "| non-stream | 256 | 1100 | 90.00 | 270.00 | 81.00 | 0.90 | 2 | — |"
    )


def test_the_probe_reads_the_connection_of_each_decision_header() -> None:
    headers = [
        "strategy=round-robin; target=bench-many/bench-model; provider=bench-many;"
        f" connection={n}; latency_ms=1; attempts=1"
        for n in (7, 8, 7)
    ]

    assert decision_connection(headers[0]) == "7"
    assert decision_connection("strategy=single; latency_ms=0; attempts=0") is None
    assert distinct_connections([*headers, ""]) == 2


def test_the_large_prompt_has_the_size_asked() -> None:
    text = prompt_text(1_000_000)

    assert len(text.encode()) == 1_000_000
    assert (size_label(1_000_000), size_label(250_000)) == ("1 MB", "250 kB")


def test_the_conversation_is_an_agents_turns_of_text_tool_call_and_result() -> None:
    messages = conversation(200)

    assert [m["role"] for m in messages[:3]] == ["user", "assistant", "tool"]
    assert len(messages) == 600
    calls: Any = messages[1]["tool_calls"]
    assert [c["id"] for c in calls] == [messages[2]["tool_call_id"]] == ["call_0"]
    assert 140_000 < len(orjson.dumps(messages)) < 200_000


def test_the_recorded_section_is_dated_and_holds_every_phase() -> None:
    reports = [PhaseReport("1 MB prompt", "| t |\n|---|", ("line one", "line two"))]

    body = render(reports, 140.25)
    text = section("2026-12-02", "1 MB prompt", "One run.", body)

    assert text == (
        "\n## 2026-12-02 — bench: 1 MB prompt\n\nOne run.\n\n### 1 MB prompt\n\n| t |\n|---|"
        "\n\n```\nline one\nline two\n```\n\nGateway peak RSS over the bench: 140.2 MiB\n"
    )
