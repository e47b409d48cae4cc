"""The scale phase: one provider with many connections against one with a single connection.

Two providers are created through the management API, both over the fake upstream and
serving ``bench-model``: ``bench-one`` with one connection and ``bench-many`` with
``Bounds.connections`` (100). Three targets, non-streaming, at concurrency 1 and 16:

* ``scale-1``: ``bench-one/bench-model``, a plan of one target;
* ``scale-N``: ``bench-many/bench-model``, a plan of N targets by priority (the first answers,
  so this times planning and ordering over N connections);
* ``scale-N-rr``: ``bench-spread``, a round-robin combo with one step over ``bench-many``'s
  model, which expands to its N connections and starts each request at the next one, so the
  requests are spread over all of them (checked before the runs: a probe of 2N sequential
  requests reads the connection each answer came from in ``X-OmniRoute-Decision``).

Each row is the median of ``Bounds.rounds`` runs, the three targets alternating.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import aiohttp
import httpx

from omniroute.tools.bench.harness import Bench, create_connection, create_provider
from omniroute.tools.bench.report import PhaseReport, median_run, over_line, table
from omniroute.tools.loadgen import RunResult

ONE, MANY, SPREAD, MODEL = "bench-one", "bench-many", "bench-spread", "bench-model"
LEVELS = (1, 16)
_CONNECTION = re.compile(r"(?:^|;\s*)connection=(\d+)")


def title(connections: int) -> str:
    return f"{connections} connections"


def prepare(api: httpx.Client, fake: str, connections: int) -> None:
    for slug, count in ((ONE, 1), (MANY, connections)):
        create_provider(api, slug, f"{fake}/v1")
        for index in range(count):
            create_connection(api, slug, f"{slug}-{index:03d}", f"{fake}/v1", MODEL, index + 1)
    combo = {
        "name": SPREAD,
        "strategy": "round-robin",
        "targets": [{"provider": MANY, "model": MODEL}],
    }
    api.post("/api/combos/", json=combo).raise_for_status()


def decision_connection(header: str) -> str | None:
    """The connection id named by an ``X-OmniRoute-Decision`` header, if any."""
    match = _CONNECTION.search(header)
    return match.group(1) if match else None


def distinct_connections(headers: Iterable[str]) -> int:
    return len({c for h in headers if (c := decision_connection(h)) is not None})


async def probe(bench: Bench, model: str, requests: int) -> int:
    """How many distinct connections answered ``requests`` sequential requests for ``model``."""
    url, _, headers = bench.through(model)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    seen = []
    async with aiohttp.ClientSession() as session:
        for _ in range(requests):
            async with session.post(url, json=body, headers=headers) as response:
                await response.read()
                seen.append(response.headers.get("x-omniroute-decision", ""))
    return distinct_connections(seen)


async def run(bench: Bench) -> PhaseReport:
    n = bench.bounds.connections
    labels = {"scale-1": f"{ONE}/{MODEL}", f"scale-{n}": f"{MANY}/{MODEL}", f"scale-{n}-rr": SPREAD}
    spread = await probe(bench, SPREAD, 2 * n)
    first = await probe(bench, f"{MANY}/{MODEL}", 20)
    rows: list[RunResult] = []
    for concurrency in LEVELS:
        runs: dict[str, list[RunResult]] = {label: [] for label in labels}
        for _ in range(bench.bounds.rounds):
            for label, model in labels.items():
                result = await bench.measure(
                    label, bench.through(model), stream=False, concurrency=concurrency
                )
                runs[label].append(result)
        rows += [median_run(found) for found in runs.values()]
    lines = [
        f"probe: {2 * n} sequential requests to {SPREAD} were answered by {spread} distinct"
        f" connections of {n}; 20 to {MANY}/{MODEL} by {first}",
        *summary(rows, n),
    ]
    return PhaseReport(title(n), table(rows), tuple(lines))


def summary(rows: list[RunResult], connections: int) -> list[str]:
    """Per concurrency: each many-connection row over the one-connection row."""
    by = {(r.label, r.concurrency): r for r in rows}
    lines = []
    for concurrency in sorted({r.concurrency for r in rows}):
        base = by.get(("scale-1", concurrency))
        for label in (f"scale-{connections}", f"scale-{connections}-rr"):
            other = by.get((label, concurrency))
            if base and other:
                lines.append(over_line(label, base, other))
    return lines
