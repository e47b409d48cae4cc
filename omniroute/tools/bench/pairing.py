"""The paired bench's arithmetic and table (pure: no processes, no clock).

Runs are grouped by cell (mode and concurrency) and side (a checkout's gateway). Each cell
compares the medians of two sides' gateway CPU per request; its noise figure is an A/A
comparison: the same arithmetic between two gateways from one checkout run in the same rounds
(the twin), or, without a twin, the spread between the first and second half of each side's
rounds (the larger of the two). When the sides differ by how they are served (``--server``,
``--workers``), a ratios table sets before against after: CPU per request, with the A/A noise
beside it and read against a limit when one applies (the workers' bar: 2 workers' CPU per request at
most 1.1× one worker's), and the request rates, stated, not judged. With a ceiling side (the
bare proxy of ``omniroute.tools.bench.bare`` in the same rounds), a last table sets the after
side against it.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from omniroute.tools.bench.report import (
    CEILING_ADDED_P50_MS,
    CEILING_RPS_SHARE,
    ceiling_verdicts,
    percent,
    ratio,
)

Cell = tuple[bool, int]  # streaming, concurrency


@dataclass(frozen=True, slots=True)
class PairedRun:
    """One measured run of one side in one round: CPU per answered request, in ms, of the
    gateway (or the bare proxy, on the ceiling side), the load generator and the fake
    upstream; the run's median latency and how long it took."""

    side: str
    stream: bool
    concurrency: int
    round: int
    requests: int
    errors: int
    gateway_ms: float
    loadgen_ms: float
    upstream_ms: float
    p50_ms: float = 0.0
    seconds: float = 0.0

    @property
    def cell(self) -> Cell:
        return (self.stream, self.concurrency)


@dataclass(frozen=True, slots=True)
class Sides:
    """The sides' names and their labels in the table; ``twin`` runs the after checkout again
    for the A/A figure (``None``: the halves' spread instead); ``bare`` is the ceiling side,
    the bare proxy (``None``: no ceiling); with ``ratios`` the ratios table is drawn, its CPU
    ratio read against ``ratio_limit`` when given."""

    before: str
    after: str
    twin: str | None
    labels: dict[str, str]
    bare: str | None = None
    ratios: bool = False
    ratio_limit: float | None = None


def serve_workers(options: Sequence[str]) -> int:
    """The worker count ``serve`` options ask for (``--workers N`` or ``--workers=N``; one
    when absent or unreadable: ``serve`` itself rejects what it cannot read)."""
    for index, option in enumerate(options):
        name, equals, value = option.partition("=")
        if name != "--workers":
            continue
        text = value if equals else (options[index + 1] if index + 1 < len(options) else "")
        return int(text) if text.isdigit() else 1
    return 1


def round_orders(sides: Sequence[str], rounds: int) -> list[tuple[str, ...]]:
    """The order of the sides in each round: with up to three sides every permutation in turn,
    so with two the order flips every round, and with three each side is first, middle and
    last equally often over six rounds; with more, the sides rotated by one each round, so
    each takes every position once in as many rounds as there are sides."""
    if len(sides) > 3:
        return [
            tuple(sides[r % len(sides) :]) + tuple(sides[: r % len(sides)]) for r in range(rounds)
        ]
    orders = list(itertools.permutations(sides))
    return [orders[r % len(orders)] for r in range(rounds)]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def change_percent(before: float, after: float) -> float:
    """How much ``after`` is above ``before``, in percent of ``before`` (0 when before is 0)."""
    return (after - before) / before * 100 if before else 0.0


def halves_spread(values: Sequence[float]) -> float:
    """The A/A noise of one side alone: the change between the medians of its first and
    second half of rounds, unsigned, in percent."""
    half = len(values) // 2
    if half == 0:
        return 0.0
    return abs(change_percent(median(values[:half]), median(values[half:])))


def cell_values(runs: Sequence[PairedRun], side: str, cell: Cell) -> list[float]:
    """One side's gateway CPU per request in one cell, in round order."""
    chosen = [r for r in runs if r.side == side and r.cell == cell]
    return [r.gateway_ms for r in sorted(chosen, key=lambda r: r.round)]


def aa_noise(runs: Sequence[PairedRun], sides: Sides, cell: Cell) -> float:
    """The cell's A/A noise in percent (unsigned): after against its twin, or the larger
    halves' spread of before and after."""
    after = cell_values(runs, sides.after, cell)
    if sides.twin is not None:
        twin = cell_values(runs, sides.twin, cell)
        return abs(change_percent(median(after), median(twin)))
    before = cell_values(runs, sides.before, cell)
    return max(halves_spread(before), halves_spread(after))


def reading(change: float, noise: float, bar: float) -> str:
    """Within or over the bar; a bar tighter than the cell's noise is reported, not enforced."""
    if noise >= bar:
        verdict = "within" if change <= bar else "over"
        return f"{verdict} (bar below noise: reported, not enforced)"
    return "within" if change <= bar else "over"


def cell_label(cell: Cell) -> str:
    stream, concurrency = cell
    return f"{'stream' if stream else 'non-stream'}, {concurrency}"


def series(values: Sequence[float]) -> str:
    return " · ".join(f"{v:.2f}" for v in values)


def signed(percent: float) -> str:
    return f"{percent:+.1f} %"


def cells_of(runs: Sequence[PairedRun]) -> list[Cell]:
    return sorted({r.cell for r in runs})


def main_table(runs: Sequence[PairedRun], sides: Sides, bar: float) -> list[str]:
    """Per cell: each run of before and after, their medians, the change, the noise and the
    reading against ``bar`` (percent)."""
    before, after = sides.labels[sides.before], sides.labels[sides.after]
    lines = [
        f"| mode, concurrency | {before} | median | {after} | median | change | A/A noise"
        f" | within {bar:g} %? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells_of(runs):
        old, new = cell_values(runs, sides.before, cell), cell_values(runs, sides.after, cell)
        change = change_percent(median(old), median(new))
        noise = aa_noise(runs, sides, cell)
        lines.append(
            f"| {cell_label(cell)} | {series(old)} | {median(old):.3f} | {series(new)}"
            f" | {median(new):.3f} | {signed(change)} | ±{noise:.1f} %"
            f" | {reading(change, noise, bar)} |"
        )
    return lines


def twin_table(runs: Sequence[PairedRun], sides: Sides) -> list[str]:
    """The A/A pair's own runs: after and its twin, their medians and the change."""
    if sides.twin is None:
        return []
    after, twin = sides.labels[sides.after], sides.labels[sides.twin]
    lines = [
        f"| mode, concurrency | {after} | median | {twin} | median | A/A change |",
        "|---|---|---|---|---|---|",
    ]
    for cell in cells_of(runs):
        one, two = cell_values(runs, sides.after, cell), cell_values(runs, sides.twin, cell)
        change = change_percent(median(one), median(two))
        lines.append(
            f"| {cell_label(cell)} | {series(one)} | {median(one):.3f} | {series(two)}"
            f" | {median(two):.3f} | {signed(change)} |"
        )
    return lines


def side_names(sides: Sides) -> list[str]:
    others = [name for name in (sides.twin, sides.bare) if name is not None]
    return [sides.before, sides.after, *others]


def others_table(runs: Sequence[PairedRun], sides: Sides) -> list[str]:
    """Per cell and side: the medians of the load generator's and the fake upstream's CPU per
    request, the median request count per run, the median of the runs' median latency (so a
    change's latency is read side by side, as its CPU is) and the errors (not part of the
    ratio)."""
    lines = [
        "| mode, concurrency | side | load generator ms/req | upstream ms/req"
        " | requests/run | p50 ms | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in cells_of(runs):
        for side in side_names(sides):
            chosen = [r for r in runs if r.side == side and r.cell == cell]
            lines.append(
                f"| {cell_label(cell)} | {sides.labels[side]}"
                f" | {median([r.loadgen_ms for r in chosen]):.3f}"
                f" | {median([r.upstream_ms for r in chosen]):.3f}"
                f" | {median([r.requests for r in chosen]):.0f}"
                f" | {median([r.p50_ms for r in chosen]):.3f}"
                f" | {sum(r.errors for r in chosen)} |"
            )
    return lines


def side_medians(runs: Sequence[PairedRun], side: str, cell: Cell) -> tuple[float, float, float]:
    """One side's medians in one cell: answered requests per run, CPU per request, p50."""
    chosen = [r for r in runs if r.side == side and r.cell == cell]
    return (
        median([r.requests for r in chosen]),
        median([r.gateway_ms for r in chosen]),
        median([r.p50_ms for r in chosen]),
    )


def ceiling_table(runs: Sequence[PairedRun], sides: Sides) -> list[str]:
    """Per cell: the after side against the bare proxy, medians over the rounds (every run is
    as long, so the ratio of requests per run is that of requests/s), the cell's A/A noise and
    the ceiling's bars, read and not enforced."""
    if sides.bare is None:
        return []
    lines = [
        "| mode, concurrency | after requests/run | bare requests/run | after/bare req/s"
        " | after CPU ms/req | bare CPU ms/req | after/bare CPU | A/A noise"
        " | p50 after − bare ms | bars |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells_of(runs):
        requests, cpu, p50 = side_medians(runs, sides.after, cell)
        bare_requests, bare_cpu, bare_p50 = side_medians(runs, sides.bare, cell)
        share, cpu_ratio = ratio(requests, bare_requests), ratio(cpu, bare_cpu)
        lines.append(
            f"| {cell_label(cell)} | {requests:.0f} | {bare_requests:.0f}"
            f" | {'—' if share is None else percent(share)} | {cpu:.3f} | {bare_cpu:.3f}"
            f" | {'—' if cpu_ratio is None else f'{cpu_ratio:.2f}×'}"
            f" | ±{aa_noise(runs, sides, cell):.1f} % | {p50 - bare_p50:+.3f}"
            f" | {ceiling_verdicts(share, p50 - bare_p50, cell[1])} |"
        )
    return lines


def requests_per_second(runs: Sequence[PairedRun], side: str, cell: Cell) -> float:
    """One side's median answered requests per second over its runs in one cell."""
    chosen = [r for r in runs if r.side == side and r.cell == cell]
    return median([r.requests / r.seconds for r in chosen if r.seconds > 0])


def ratio_reading(cpu_ratio: float | None, noise: float, limit: float | None) -> str:
    """The CPU ratio against ``limit`` (a bar on before/after): ``reading``'s verdict, the limit
    as a percentage above one; no limit, no verdict."""
    if limit is None or cpu_ratio is None:
        return "—"
    return reading((cpu_ratio - 1) * 100, noise, (limit - 1) * 100)


def ratios_table(runs: Sequence[PairedRun], sides: Sides) -> list[str]:
    """Per cell: before over after by medians, CPU per request (the figure judged, with the
    cell's A/A noise and the limit's reading) and requests/s with the load generator's CPU per
    request on each side (stated, not judged)."""
    if not sides.ratios:
        return []
    limit = "bar" if sides.ratio_limit is None else f"within {sides.ratio_limit:g}×?"
    lines = [
        "| mode, concurrency | before CPU ms/req | after CPU ms/req | before/after CPU"
        f" | A/A noise | {limit} | before req/s | after req/s | before/after req/s"
        " | load generator ms/req before · after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells_of(runs):
        old, new = (
            median(cell_values(runs, sides.before, cell)),
            median(cell_values(runs, sides.after, cell)),
        )
        cpu_ratio, noise = ratio(old, new), aa_noise(runs, sides, cell)
        old_rate, new_rate = (
            requests_per_second(runs, sides.before, cell),
            requests_per_second(runs, sides.after, cell),
        )
        rate_ratio = ratio(old_rate, new_rate)
        loadgen = [
            median([r.loadgen_ms for r in runs if r.side == side and r.cell == cell])
            for side in (sides.before, sides.after)
        ]
        lines.append(
            f"| {cell_label(cell)} | {old:.3f} | {new:.3f}"
            f" | {'—' if cpu_ratio is None else f'{cpu_ratio:.2f}×'} | ±{noise:.1f} %"
            f" | {ratio_reading(cpu_ratio, noise, sides.ratio_limit)} | {old_rate:.0f}"
            f" | {new_rate:.0f} | {'—' if rate_ratio is None else f'{rate_ratio:.2f}×'}"
            f" | {loadgen[0]:.3f} · {loadgen[1]:.3f} |"
        )
    return lines


def render(runs: Sequence[PairedRun], sides: Sides, bar: float) -> str:
    """The tables, each after a one-line heading, as Markdown."""
    parts = [
        "Gateway CPU per request (ms), every run in round order:",
        "\n".join(main_table(runs, sides, bar)),
    ]
    if sides.twin is not None:
        parts += ["A/A pair (the noise figure):", "\n".join(twin_table(runs, sides))]
    parts += [
        "Load generator and fake upstream CPU per request, and latency (medians), outside the"
        " ratio:",
        "\n".join(others_table(runs, sides)),
    ]
    if sides.ratios:
        parts += [
            f"{sides.labels[sides.before]} over {sides.labels[sides.after]}, medians: CPU per"
            " request against the A/A noise; requests/s and the load generator's CPU stated,"
            " not judged:",
            "\n".join(ratios_table(runs, sides)),
        ]
    if sides.bare is not None:
        parts += [
            "Against the ceiling, the bare proxy (bars: after req/s ≥"
            f" {percent(CEILING_RPS_SHARE)} of the bare proxy's; at one client, p50 ≤ the bare"
            f" proxy's + {CEILING_ADDED_P50_MS} ms; reported, not enforced):",
            "\n".join(ceiling_table(runs, sides)),
        ]
    return "\n\n".join(parts) + "\n"
