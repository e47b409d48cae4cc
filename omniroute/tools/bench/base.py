"""The base phase: direct vs gateway, the bare proxy's ceiling, a fail-over and a combo with a
failing first target.

Five targets: ``direct`` (the fake upstream itself), ``bare-proxy`` (the fake upstream through
the bare Channels proxy of ``omniroute.tools.bench.bare``: the framework's ceiling), ``gateway``
(``mock/demo-model`` through the gateway: one upstream call), ``gateway-failover`` (seeddemo's
``demo-failover`` combo: its first target always answers 404 ``model_not_found``, which the
gateway charges to the request without counting or locking anything, so every request calls the
failing target and then the second one) and ``gateway-combo`` (a priority combo of three
targets, created through the management API as an operator would: the first always answers 503,
the second and third answer; the gateway counts the 503s against that one (connection, model)
pair, takes it out after ``availability.consecutiveFailures`` of them and probes it again when
its lock ends, so most requests skip it without a call). The summary's ``failover`` lines are
the added cost of a failing first target over the plain gateway row; the ceiling table sets each
gateway row against the bare proxy's in the same mode and concurrency.
"""

from __future__ import annotations

import httpx

from omniroute.tools.bench.harness import Bench, Target, create_connection
from omniroute.tools.bench.report import (
    PhaseReport,
    added_line,
    ceiling_table,
    combo_line,
    failover_line,
    table,
)
from omniroute.tools.loadgen import RunResult
from routing.management.commands.seeddemo import FAILOVER_COMBO

TITLE = "direct, bare proxy, gateway, fail-over, combo"
BARE, GATEWAY, FAILOVER, COMBO = "bare-proxy", "gateway", "gateway-failover", "gateway-combo"
BENCH_COMBO, BENCH_MODEL = "bench-priority", "bench-model"


def prepare(api: httpx.Client, fake: str) -> None:
    """Three ``mock`` connections and a priority combo over them, the first target on the
    fake's ``/s/status=503`` scenario (a 503 for every call)."""
    connections = [
        ("bench-down", f"{fake}/s/status=503/v1", "bench-down"),
        ("bench-up-1", f"{fake}/v1", BENCH_MODEL),
        ("bench-up-2", f"{fake}/v1", BENCH_MODEL),
    ]
    targets = [
        {
            "provider": "mock",
            "model": model,
            "connection": create_connection(api, "mock", name, url, model, priority),
        }
        for priority, (name, url, model) in enumerate(connections, start=40)
    ]
    combo = {"name": BENCH_COMBO, "strategy": "priority", "targets": targets}
    api.post("/api/combos/", json=combo).raise_for_status()


async def run(bench: Bench) -> PhaseReport:
    targets: dict[str, Target] = {
        "direct": bench.direct(),
        BARE: bench.bare_proxy(),
        GATEWAY: bench.through("mock/demo-model"),
        FAILOVER: bench.through(FAILOVER_COMBO),
        COMBO: bench.through(BENCH_COMBO),
    }
    results = [
        await bench.measure(label, target, stream=stream, concurrency=concurrency)
        for stream in (False, True)
        for concurrency in bench.bounds.levels
        for label, target in targets.items()
    ]
    tables = f"{table(results)}\n\n{ceiling_table(ceiling_pairs(results))}"
    return PhaseReport(TITLE, tables, tuple(summary(results)))


def ceiling_pairs(results: list[RunResult]) -> list[tuple[RunResult, RunResult]]:
    """Each gateway run with the bare proxy's run of the same mode and concurrency."""
    bare = {(r.stream, r.concurrency): r for r in results if r.label == BARE}
    return [
        (r, bare[r.stream, r.concurrency])
        for r in results
        if r.label == GATEWAY and (r.stream, r.concurrency) in bare
    ]


def summary(results: list[RunResult]) -> list[str]:
    """Per mode and concurrency: the gateway over direct, the fail-over over the gateway, the
    combo over both."""
    runs = {(r.stream, r.concurrency, r.label): r for r in results}
    keys = [(s, c) for s in (False, True) for c in sorted({r.concurrency for r in results})]
    lines = []
    for stream, concurrency in keys:
        direct, gateway = (
            runs.get((stream, concurrency, "direct")),
            runs.get((stream, concurrency, GATEWAY)),
        )
        if direct and gateway:
            lines.append(added_line(direct, gateway))
    for stream, concurrency in keys:
        gateway, failover = (
            runs.get((stream, concurrency, GATEWAY)),
            runs.get((stream, concurrency, FAILOVER)),
        )
        if gateway and failover:
            lines.append(failover_line(gateway, failover))
    for stream, concurrency in keys:
        direct, gateway, combo = (
            runs.get((stream, concurrency, label)) for label in ("direct", GATEWAY, COMBO)
        )
        if direct and gateway and combo:
            lines.append(combo_line(direct, gateway, combo))
    return lines
