"""The bench's tables and summary lines (pure: runs in, Markdown and text out)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from omniroute.tools.loadgen import RunResult

HEADER = (
    "| target | mode | conc | req/s | p50 ms | p99 ms | TTFB p50 ms | proxy CPU ms/req | errors |\n"
    "|---|---|---|---|---|---|---|---|---|"
)
SWEEP_HEADER = (
    "| mode | conc | req/s | p50 ms | p99 ms | TTFB p50 ms | gw CPU ms/req | errors "
    "| upstream conns |\n|---|---|---|---|---|---|---|---|---|"
)


@dataclass(frozen=True, slots=True)
class PhaseReport:
    """What one phase measured: its rows as a Markdown table and its summary lines."""

    title: str
    table: str
    summary: tuple[str, ...]


def _cpu(r: RunResult) -> str:
    return f"{r.cpu_ms_per_request:.2f}" if r.cpu_ms_per_request is not None else "—"


def row(r: RunResult) -> str:
    mode = "stream" if r.stream else "non-stream"
    return (
        f"| {r.label} | {mode} | {r.concurrency} | {r.rps:.0f} | {r.p50_ms:.2f} | "
        f"{r.p99_ms:.2f} | {r.ttfb_p50_ms:.2f} | {_cpu(r)} | {r.errors} |"
    )


def table(results: Sequence[RunResult]) -> str:
    return "\n".join([HEADER, *(row(r) for r in results)])


def sweep_row(r: RunResult) -> str:
    """A row of the concurrency sweep (one target, so no label column)."""
    mode = "stream" if r.stream else "non-stream"
    peers = "—" if r.upstream_peers is None else str(r.upstream_peers)
    return (
        f"| {mode} | {r.concurrency} | {r.rps:.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
        f"{r.ttfb_p50_ms:.2f} | {_cpu(r)} | {r.errors} | {peers} |"
    )


def mode(r: RunResult) -> str:
    return f"{'stream' if r.stream else 'non-stream'} c={r.concurrency}"


def added_line(direct: RunResult, gateway: RunResult) -> str:
    """What the gateway adds to a direct call."""
    return (
        f"{mode(gateway)}: added p50 {gateway.p50_ms - direct.p50_ms:.2f} ms,"
        f" added TTFB {gateway.ttfb_p50_ms - direct.ttfb_p50_ms:.2f} ms,"
        f" gateway CPU {gateway.cpu_ms_per_request or 0:.2f} ms/request"
    )


def failover_line(gateway: RunResult, failover: RunResult) -> str:
    """What a fail-over adds to a plain gateway request, and how many upstream calls each
    fail-over request made (2 when every request called both targets)."""
    cpu = (failover.cpu_ms_per_request or 0) - (gateway.cpu_ms_per_request or 0)
    calls = failover.calls_per_request
    return (
        f"failover {mode(failover)}: added p50 {failover.p50_ms - gateway.p50_ms:.2f} ms,"
        f" added TTFB {failover.ttfb_p50_ms - gateway.ttfb_p50_ms:.2f} ms,"
        f" added gateway CPU {cpu:.2f} ms/request over the gateway row;"
        f" upstream calls/request {calls or 0:.2f}"
        f" ({failover.upstream_failed} of {failover.upstream_calls} calls failed)"
    )


def combo_line(direct: RunResult, gateway: RunResult, combo: RunResult) -> str:
    """What the combo adds to a direct call (as the gateway rows say it), what it adds to a
    single-model gateway request, and how many upstream calls each of its requests made."""
    cpu = (combo.cpu_ms_per_request or 0) - (gateway.cpu_ms_per_request or 0)
    return (
        f"combo {added_line(direct, combo)};"
        f" over the single-model row: p50 {combo.p50_ms - gateway.p50_ms:+.2f} ms,"
        f" CPU {cpu:+.2f} ms/request; upstream calls/request {combo.calls_per_request or 0:.2f}"
        f" ({combo.upstream_failed} of {combo.upstream_calls} calls failed)"
    )


CEILING_HEADER = (
    "| mode | conc | gw req/s | bare req/s | gw/bare req/s | gw CPU ms/req | bare CPU ms/req"
    " | gw/bare CPU | p50 gw − bare ms | load gen CPU ms/req, gw · bare"
    " | upstream CPU ms/req, gw · bare | bars |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def percent(share: float) -> str:
    return f"{share * 100:.0f} %"


CEILING_RPS_SHARE = 0.9  # the gateway's requests/s against the bare proxy's, at least
CEILING_ADDED_P50_MS = 0.1  # the gateway's p50 over the bare proxy's at one client, at most
CEILING_INTRO = (
    "Against the ceiling: the bare proxy (a Channels consumer on the same daphne entry,"
    " forwarding to the same fake upstream, streams through the same SSE splitter)."
    f" Bars, reported and not enforced: gateway req/s ≥ {percent(CEILING_RPS_SHARE)} of the bare"
    f" proxy's; at one client its p50 ≤ the bare proxy's + {CEILING_ADDED_P50_MS} ms."
    " CPU is each proxy's with its children's (the gateway's request-log writer); the load"
    " generator's and the fake upstream's are outside"
    " the ratio. One run per cell: for the bars, read the paired rounds of"
    " `make bench-paired BASE=… CEILING=1`."
)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def ratio(over: float | None, under: float | None) -> float | None:
    """``over`` in units of ``under``; none when either is unknown or ``under`` is 0."""
    return over / under if over is not None and under else None


def ceiling_verdicts(share: float | None, added_p50_ms: float, concurrency: int) -> str:
    """Whether the gateway meets the ceiling's bars in one cell, given its share of the bare
    proxy's request rate and its p50 over the bare proxy's: the rate in every cell, the added
    p50 at one client only."""
    verdicts = [f"req/s {'met' if share is not None and share >= CEILING_RPS_SHARE else 'missed'}"]
    if concurrency == 1:
        verdicts.append(f"p50 {'met' if added_p50_ms <= CEILING_ADDED_P50_MS else 'missed'}")
    return ", ".join(verdicts)


def ceiling_bars(gateway: RunResult, bare: RunResult) -> str:
    """The ceiling's verdicts for a gateway run against the bare proxy's run."""
    share = ratio(gateway.rps, bare.rps)
    return ceiling_verdicts(share, gateway.p50_ms - bare.p50_ms, gateway.concurrency)


def ceiling_row(gateway: RunResult, bare: RunResult) -> str:
    """One cell (mode and concurrency) of the gateway against the bare proxy."""
    share = ratio(gateway.rps, bare.rps)
    cpu = ratio(gateway.cpu_ms_per_request, bare.cpu_ms_per_request)
    return (
        f"| {'stream' if gateway.stream else 'non-stream'} | {gateway.concurrency}"
        f" | {gateway.rps:.0f} | {bare.rps:.0f} | {'—' if share is None else percent(share)}"
        f" | {_ms(gateway.cpu_ms_per_request)} | {_ms(bare.cpu_ms_per_request)}"
        f" | {'—' if cpu is None else f'{cpu:.2f}×'} | {gateway.p50_ms - bare.p50_ms:+.3f}"
        f" | {_ms(gateway.loadgen_cpu_ms_per_request)} · {_ms(bare.loadgen_cpu_ms_per_request)}"
        f" | {_ms(gateway.upstream_cpu_ms_per_request)}"
        f" · {_ms(bare.upstream_cpu_ms_per_request)} | {ceiling_bars(gateway, bare)} |"
    )


def ceiling_table(pairs: Sequence[tuple[RunResult, RunResult]]) -> str:
    """The ceiling's paragraph and table: one row per (gateway, bare proxy) pair of runs."""
    rows = [ceiling_row(gateway, bare) for gateway, bare in pairs]
    return "\n".join([CEILING_INTRO, "", CEILING_HEADER, *rows])


def median_run(runs: Sequence[RunResult]) -> RunResult:
    """Repeated runs of one target, mode and concurrency as one row: the median of each
    figure (rate, percentiles, CPU per request), the requests and errors of all of them."""
    first = runs[0]
    if len(runs) == 1:
        return first
    seconds = sum(r.seconds for r in runs)
    requests = round(statistics.median(r.rps for r in runs) * seconds)
    return replace(
        first,
        requests=requests,
        errors=sum(r.errors for r in runs),
        seconds=seconds,
        p50_ms=statistics.median(r.p50_ms for r in runs),
        p99_ms=statistics.median(r.p99_ms for r in runs),
        ttfb_p50_ms=statistics.median(r.ttfb_p50_ms for r in runs),
        cpu_ms_per_request=_median_of_known([r.cpu_ms_per_request for r in runs]),
        loadgen_cpu_ms_per_request=_median_of_known([r.loadgen_cpu_ms_per_request for r in runs]),
        upstream_cpu_ms_per_request=_median_of_known([r.upstream_cpu_ms_per_request for r in runs]),
        upstream_calls=None,
        upstream_failed=None,
        upstream_peers=None,
    )


def _median_of_known(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def over_line(name: str, base: RunResult, other: RunResult) -> str:
    """``other`` against ``base`` (same mode and concurrency): p50, p99, CPU and rate."""
    cpu = (other.cpu_ms_per_request or 0) - (base.cpu_ms_per_request or 0)
    return (
        f"{name} {mode(other)} over {base.label}: p50 {other.p50_ms - base.p50_ms:+.2f} ms,"
        f" p99 {other.p99_ms - base.p99_ms:+.2f} ms, gateway CPU {cpu:+.2f} ms/request"
        f" ({other.cpu_ms_per_request or 0:.2f} vs {base.cpu_ms_per_request or 0:.2f}),"
        f" req/s {other.rps:.0f} vs {base.rps:.0f}"
    )


def prompt_line(small: tuple[RunResult, RunResult], big: tuple[RunResult, RunResult]) -> str:
    """What a large prompt costs: the gateway's added p50 over a direct call and its CPU per
    request, each beside the same figures for a small prompt. Pairs are (direct, gateway)."""
    (direct_small, gateway_small), (direct_big, gateway_big) = small, big
    cpu_big, cpu_small = gateway_big.cpu_ms_per_request or 0, gateway_small.cpu_ms_per_request or 0
    return (
        f"{gateway_big.label} {mode(gateway_big)}: added p50 over direct"
        f" {gateway_big.p50_ms - direct_big.p50_ms:.2f} ms (small prompt"
        f" {gateway_small.p50_ms - direct_small.p50_ms:.2f} ms), gateway CPU {cpu_big:.2f}"
        f" ms/request (small prompt {cpu_small:.2f}, so {cpu_big - cpu_small:+.2f} ms for the"
        f" body); direct p50 {direct_big.p50_ms:.2f} ms (small prompt {direct_small.p50_ms:.2f})"
    )


def sweep_line(runs: Sequence[RunResult]) -> str:
    """The sweep of one mode in a line: its best rate, and p99 and errors at its top level."""
    best = max(runs, key=lambda r: r.rps)
    top = max(runs, key=lambda r: r.concurrency)
    return (
        f"sweep {'stream' if top.stream else 'non-stream'}: peak {best.rps:.0f} req/s at"
        f" c={best.concurrency}; at c={top.concurrency} {top.rps:.0f} req/s, p50"
        f" {top.p50_ms:.2f} ms, p99 {top.p99_ms:.2f} ms, gateway CPU {_cpu(top)} ms/request,"
        f" {sum(r.errors for r in runs)} errors over the sweep"
    )


def render(reports: Sequence[PhaseReport], rss_mib: float | None) -> str:
    """Every phase as a third-level section (its table, then its summary), and the gateway's
    peak RSS over the whole bench (none when no phase started it)."""
    parts = [
        f"### {r.title}\n\n{r.table}\n\n```\n" + "\n".join(r.summary) + "\n```" for r in reports
    ]
    if rss_mib is not None:
        parts.append(f"Gateway peak RSS over the bench: {rss_mib:.1f} MiB")
    return "\n\n".join(parts)


def section(date: str, title: str, intro: str, body: str) -> str:
    """A dated BENCHMARKS.md section."""
    return f"\n## {date} — bench: {title}\n\n{intro}\n\n{body}\n"
