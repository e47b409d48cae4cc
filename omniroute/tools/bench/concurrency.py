"""The concurrency phase: throughput through the gateway as clients grow to 256.

``mock/demo-model`` through the gateway at each level of ``Bounds.sweep`` (1, 16, 64, 128,
256 closed-loop clients), non-streaming then streaming, each run bounded by the duration and
the request cap. The load generator opens one connection per client (its pool's limit is the
concurrency); "upstream conns" is how many distinct client connections the fake upstream saw
during the run: the gateway's pool connections that carried it (the pool takes its idle
connections in turn, so a run after a larger one can touch more than its concurrency). Before
the sweep, one direct run at the top level checks that the fake itself holds that many
clients.
"""

from __future__ import annotations

from omniroute.tools.bench.harness import Bench
from omniroute.tools.bench.report import SWEEP_HEADER, PhaseReport, sweep_line, sweep_row
from omniroute.tools.loadgen import RunResult


def title(sweep: tuple[int, ...]) -> str:
    return f"concurrency to {max(sweep)}"


async def run(bench: Bench) -> PhaseReport:
    sweep = bench.bounds.sweep
    top = max(sweep)
    direct = await bench.measure("direct", bench.direct(), stream=False, concurrency=top)
    target = bench.through("mock/demo-model")
    rows: list[RunResult] = [
        await bench.measure("gateway", target, stream=stream, concurrency=concurrency)
        for stream in (False, True)
        for concurrency in sweep
    ]
    lines = [
        f"direct c={top} (the fake alone): {direct.rps:.0f} req/s, p99 {direct.p99_ms:.2f} ms,"
        f" {direct.errors} errors, {direct.upstream_peers} client connections held",
        *(sweep_line([r for r in rows if r.stream is s]) for s in (False, True)),
    ]
    table = "\n".join([SWEEP_HEADER, *(sweep_row(r) for r in rows)])
    return PhaseReport(title(sweep), table, tuple(lines))
