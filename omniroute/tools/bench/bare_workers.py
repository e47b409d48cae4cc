"""The bare-workers phase: what a second process costs the framework itself.

``serve --workers 2`` is judged on a 2-core machine by its CPU per request against one
worker's (docs/architecture.md, checks and measurements). This phase measures the same ratio
for the bench's ceiling, the bare proxy (``omniroute.tools.bench.bare``): ``bare-proxy`` (one
process, the one the base phase runs) against ``bare-proxy-2`` (two processes accepting on one
inherited socket, as the gateway's workers do), plain and streaming, at the base phase's
levels, the two alternating, ``Bounds.rounds`` runs each; a row is the median run. The CPU of
``bare-proxy-2`` is summed over its two processes. Everything else on the machine (the load
generator, the fake upstream) is the same for both, so the ratio is the framework's own cost
of a second process here, the figure the gateway's two workers compare with.
"""

from __future__ import annotations

from omniroute.tools.bench.bare_server import bare_proxies
from omniroute.tools.bench.harness import Bench, Target
from omniroute.tools.bench.report import PhaseReport, median_run, mode, table
from omniroute.tools.loadgen import RunResult, free_port

TITLE = "the bare proxy, one process against two"
ONE, TWO = "bare-proxy", "bare-proxy-2"


async def run(bench: Bench) -> PhaseReport:
    if bench.bare is None:
        raise RuntimeError("the bare-workers phase needs the bench's bare proxy")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with bare_proxies(bench.env, port, bench.fake, 2) as pids:
        bench.proxies[base] = pids
        two: Target = (f"{base}/v1/chat/completions", "demo-model", {})
        rows: list[RunResult] = []
        for stream in (False, True):
            for concurrency in bench.bounds.levels:
                runs: dict[str, list[RunResult]] = {ONE: [], TWO: []}
                for index in range(bench.bounds.rounds):
                    order = [(ONE, bench.bare_proxy()), (TWO, two)]
                    for label, target in order if index % 2 == 0 else reversed(order):
                        result = await bench.measure(
                            label, target, stream=stream, concurrency=concurrency
                        )
                        runs[label].append(result)
                rows += [median_run(runs[ONE]), median_run(runs[TWO])]
        del bench.proxies[base]
    return PhaseReport(TITLE, table(rows), tuple(summary(rows)))


def summary(rows: list[RunResult]) -> list[str]:
    """Per mode and concurrency: two processes' CPU per request over one's."""
    by = {(r.label, r.stream, r.concurrency): r for r in rows}
    lines = []
    for stream, concurrency in sorted({(r.stream, r.concurrency) for r in rows}):
        one, two = by.get((ONE, stream, concurrency)), by.get((TWO, stream, concurrency))
        if one is None or two is None:
            continue
        if one.cpu_ms_per_request and two.cpu_ms_per_request:
            lines.append(
                f"{TWO} {mode(two)} over {ONE}: CPU per request"
                f" {two.cpu_ms_per_request / one.cpu_ms_per_request:.2f}×"
                f" ({two.cpu_ms_per_request:.3f} vs {one.cpu_ms_per_request:.3f} ms),"
                f" req/s {two.rps:.0f} vs {one.rps:.0f}"
            )
    return lines
