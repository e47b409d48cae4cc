"""The soak run behind ``make soak``: minutes of mixed load on a healthy upstream through one
gateway process, and whether the gateway's memory keeps growing.

The fake upstream and a daphne gateway (embedded default: SQLite, memory store, its own data
directory) run on 127.0.0.1; two closed loops of ``concurrency`` clients each send streaming and
plain chat requests to ``mock/demo-model`` until ``duration`` runs out (or a loop has sent
``MAX_REQUESTS_PER_SECOND`` × ``duration`` requests). Every ``sample_seconds`` the gateway's
resident size is read from ``/proc/<pid>/status`` (``VmRSS``); a least-squares line through the
samples taken after ``warm_up`` seconds gives the growth in MiB per minute. The run fails when
that growth passes ``bound_mib_per_minute`` or when any request failed (a status other than 200,
no body, a transport error).

The request log is on, with a row bound below what the run answers and a short prune interval:
after the load, every answered request must have been written to it (the writer's counters on
``/metrics``: written, and dropped when its queue was full, which below that queue's bound must
not happen), and the table must be pruned back to its bound (docs/operating.md, "Request log").
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import textwrap
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx
from prometheus_client.parser import text_string_to_metric_families

from omniroute.tools.loadgen import (
    free_port,
    gateway_env,
    manage,
    process_peak_rss_mib,
    process_rss_mib,
    run_load,
    spawned,
    temporary_data_dir,
    tool_env,
)

MODEL: Final = "mock/demo-model"
MAX_REQUESTS_PER_SECOND: Final = 5000  # per loop: a cap far above what one gateway answers here
SECTION_SUFFIX: Final = " — soak and memory bounds"
Sample = tuple[float, float]  # seconds since the load began, resident MiB


@dataclass(frozen=True, slots=True)
class SoakPlan:
    """How long and how hard the soak runs, and the growth it tolerates."""

    duration: float = 180.0
    warm_up: float = 30.0  # samples before this are left out of the fit
    concurrency: int = 4  # clients per loop (one streaming loop, one plain)
    sample_seconds: float = 1.0
    bound_mib_per_minute: float = 2.0
    chunks: int = 20  # per streamed answer
    chunk_interval_ms: float = 1.0
    log_max_rows: int = 5_000  # the request log's bound: below what a run answers, so it prunes
    log_prune_seconds: float = 2.0
    log_wait_seconds: float = 30.0  # for the writer to catch up, then for the last prune


@dataclass(frozen=True, slots=True)
class LogOutcome:
    """What the request log did with the run's requests: records written and dropped (its
    ``/metrics`` counters) and the table's rows after the last prune."""

    written: int
    dropped: int
    rows: int


@dataclass(frozen=True, slots=True)
class Loop:
    """What one closed loop of clients got."""

    stream: bool
    answered: int
    errors: int


@dataclass(frozen=True, slots=True)
class SoakResult:
    """The load's outcome and the gateway's resident size over time."""

    plan: SoakPlan
    loops: tuple[Loop, ...]
    seconds: float
    samples: tuple[Sample, ...]
    peak_mib: float
    log: LogOutcome | None = None

    @property
    def errors(self) -> int:
        return sum(loop.errors for loop in self.loops)

    @property
    def answered(self) -> int:
        return sum(loop.answered for loop in self.loops)

    @property
    def fitted(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s[0] >= self.plan.warm_up)

    @property
    def growth_mib_per_minute(self) -> float:
        return slope_per_minute(self.fitted)

    def failures(self) -> list[str]:
        """Why the run fails; empty when it passes."""
        reasons = [] if self.answered else ["no request was answered"]
        if self.errors:
            reasons.append(f"{self.errors} request(s) failed")
        if len(self.fitted) < 2:
            reasons.append("fewer than two samples after the warm-up")
        elif self.growth_mib_per_minute > self.plan.bound_mib_per_minute:
            reasons.append(
                f"RSS grew {self.growth_mib_per_minute:.2f} MiB/min, "
                f"above {self.plan.bound_mib_per_minute:g}"
            )
        return reasons + self._log_failures()

    def _log_failures(self) -> list[str]:
        log, bound = self.log, self.plan.log_max_rows
        if log is None:
            return ["the request log was not read"]
        reasons = []
        if (missing := self.answered - log.written - log.dropped) > 0:
            reasons.append(f"{missing} answered request(s) never reached the request log")
        if log.dropped:
            reasons.append(f"the request log dropped {log.dropped} record(s) (its queue filled)")
        if log.rows > bound:
            reasons.append(f"the request log holds {log.rows} rows, above its bound of {bound}")
        return reasons


def slope_per_minute(samples: Sequence[Sample]) -> float:
    """The least-squares slope of ``samples`` (seconds, MiB), in MiB per minute; 0 for fewer
    than two samples or no spread in time."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if not spread:
        return 0.0
    return 60 * sum((t - mean_t) * (m - mean_m) for t, m in samples) / spread


async def _sample(pid: int, every: float, until: float, into: list[Sample]) -> None:
    """``pid``'s resident size every ``every`` seconds until ``until``, and once at the end."""
    started = time.perf_counter()
    while (now := time.perf_counter()) < until:
        into.append((now - started, process_rss_mib(pid)))
        await asyncio.sleep(min(every, max(until - time.perf_counter(), 0.0)))
    into.append((time.perf_counter() - started, process_rss_mib(pid)))


async def _drive(
    url: str, key: str, pid: int, plan: SoakPlan
) -> tuple[list[Loop], float, list[Sample]]:
    """Both loops and the sampler, side by side, for ``plan.duration``."""
    headers = {"authorization": f"Bearer {key}"}
    cap = int(MAX_REQUESTS_PER_SECOND * plan.duration)
    samples: list[Sample] = []
    until = time.perf_counter() + plan.duration
    sampler = asyncio.create_task(_sample(pid, plan.sample_seconds, until, samples))
    loads = [
        run_load(
            url,
            {"model": MODEL, "messages": [{"role": "user", "content": "soak"}], "stream": stream},
            headers,
            concurrency=plan.concurrency,
            duration=plan.duration,
            max_requests=cap,
        )
        for stream in (True, False)
    ]
    measured = await asyncio.gather(*loads)
    await sampler
    loops = [Loop(s, len(m[0]), m[2]) for s, m in zip((True, False), measured, strict=True)]
    return loops, max(m[3] for m in measured), samples


_PREPARE: Final = (
    "from django.core.management import call_command; "
    "call_command('migrate', interactive=False, verbosity=0); "
    "call_command('seeddemo', upstream_url={url!r})"
)


def _prepare(env: dict[str, str], upstream_url: str) -> str:
    """Migrate and seed the demo in one process (one Django start-up, not two); the demo key."""
    argv = manage("shell", "-c", _PREPARE.format(url=upstream_url))
    output = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    match = re.search(r"sk-omr-[A-Za-z0-9_-]+", output)
    if match is None:
        raise RuntimeError("seeddemo printed no key")
    return match.group(0)


def _log_counters(base_url: str) -> tuple[int, int]:
    """The request log's written and dropped counters on the gateway's ``/metrics``."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    found = {"omniroute_request_log_written": 0, "omniroute_request_log_dropped": 0}
    for family in text_string_to_metric_families(text):
        if family.name in found:
            found[family.name] = int(
                sum(s.value for s in family.samples if s.name.endswith("_total"))
            )
    return found["omniroute_request_log_written"], found["omniroute_request_log_dropped"]


def _log_rows(database: Path) -> int:
    with sqlite3.connect(database, timeout=10) as connection:
        (rows,) = connection.execute("SELECT COUNT(*) FROM request_log").fetchone()
    return int(rows)


def _read_log(base_url: str, database: Path, answered: int, plan: SoakPlan) -> LogOutcome:
    """Wait (bounded) until the writer accounted for every answered request and a prune
    brought the table within its bound, then read both."""
    deadline = time.monotonic() + plan.log_wait_seconds
    written, dropped = _log_counters(base_url)
    while written + dropped < answered and time.monotonic() < deadline:
        time.sleep(0.2)
        written, dropped = _log_counters(base_url)
    rows = _log_rows(database)
    while rows > plan.log_max_rows and time.monotonic() < deadline:
        time.sleep(0.2)
        rows = _log_rows(database)
    return LogOutcome(written, dropped, rows)


def run_soak(plan: SoakPlan) -> SoakResult:
    """Start the fake upstream and a gateway, soak it, stop them; bounded by ``duration``."""
    with temporary_data_dir() as data_dir, ThreadPoolExecutor(max_workers=1) as pool:
        env = {
            **gateway_env(data_dir),
            "OMNIROUTE_REQUEST_LOG": "1",
            "OMNIROUTE_REQUEST_LOG_MAX_ROWS": str(plan.log_max_rows),
            "OMNIROUTE_REQUEST_LOG_PRUNE_SECONDS": str(plan.log_prune_seconds),
        }
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage(
            "fakeupstream",
            "--port",
            str(fake_port),
            "--no-record",
            "--chunks",
            str(plan.chunks),
            "--chunk-interval-ms",
            str(plan.chunk_interval_ms),
        )
        # The database migrates while the fake upstream starts.
        prepared = pool.submit(_prepare, env, f"http://127.0.0.1:{fake_port}/v1")
        log = Path(data_dir) / "processes.log"
        gateway_argv = manage("serve", "--port", str(gw_port), "--no-collectstatic")
        with spawned(fake_argv, tool_env(env), fake_port, log=log):
            key = prepared.result()
            with spawned(gateway_argv, env, gw_port, log=log) as gateway:
                url = f"http://127.0.0.1:{gw_port}/v1/chat/completions"
                loops, seconds, samples = asyncio.run(_drive(url, key, gateway.pid, plan))
                peak = process_peak_rss_mib(gateway.pid)
                answered = sum(loop.answered for loop in loops)
                database = Path(data_dir) / "omniroute.sqlite3"
                logged = _read_log(f"http://127.0.0.1:{gw_port}", database, answered, plan)
    return SoakResult(plan, tuple(loops), seconds, tuple(samples), peak, logged)


# --------------------------------------------------------------------------- the report

HEADER: Final = (
    "| duration s | conc. (stream + plain) | answered (stream / plain) | req/s | errors "
    "| RSS after warm-up → end MiB | peak MiB | growth MiB/min | bound "
    "| log written / dropped | log rows (bound) | result |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def report(result: SoakResult) -> str:
    """The run as a one-row Markdown table."""
    plan, fitted = result.plan, result.fitted
    by_mode = " / ".join(str(loop.answered) for loop in result.loops)
    rps = result.answered / result.seconds if result.seconds else 0.0
    rss = f"{fitted[0][1]:.1f} → {fitted[-1][1]:.1f}" if fitted else "—"
    verdict = "pass" if not result.failures() else "FAIL: " + "; ".join(result.failures())
    row = (
        f"| {result.seconds:.0f} | {plan.concurrency} + {plan.concurrency} | {by_mode} "
        f"| {rps:.0f} | {result.errors} | {rss} | {result.peak_mib:.1f} "
        f"| {result.growth_mib_per_minute:+.2f} | {plan.bound_mib_per_minute:g} "
        f"| {_log_cells(result)} | {verdict} |"
    )
    return f"{HEADER}\n{row}"


def _log_cells(result: SoakResult) -> str:
    log = result.log
    if log is None:
        return "— | —"
    return f"{log.written} / {log.dropped} | {log.rows} ({result.plan.log_max_rows})"


def section(result: SoakResult, date: str, stamp: str) -> str:
    """The soak block of BENCHMARKS.md, under its dated title."""
    plan = result.plan
    intro = (
        f"`manage.py soak --duration {plan.duration:g}`, {stamp}: one daphne gateway (embedded "
        f"default: SQLite, memory store) on a healthy fake upstream; {plan.concurrency} clients "
        f"streaming ({plan.chunks} chunks {plan.chunk_interval_ms:g} ms apart) and "
        f"{plan.concurrency} sending plain chat requests, closed loop. The gateway's VmRSS is "
        f"read every {plan.sample_seconds:g} s; the growth is the least-squares slope over the "
        f"samples after a {plan.warm_up:g} s warm-up. Bound: {plan.bound_mib_per_minute:g} "
        "MiB/min and no failed request. The request log is on, bounded to "
        f"{plan.log_max_rows} rows pruned every {plan.log_prune_seconds:g} s: every answered "
        "request must be written (none dropped) and the table pruned to its bound. Taken on a "
        "shared 2-core machine."
    )
    return f"## {date}{SECTION_SUFFIX}\n\n{textwrap.fill(intro, 95)}\n\n{report(result)}\n"


def replace_section(document: str, new_section: str) -> str:
    """``document`` with the block under ``new_section``'s title replaced (up to the next
    heading of any level, so subsections written by hand stay), or the section appended."""
    title = new_section.splitlines()[0]
    lines = document.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == title), None)
    if start is None:
        return document.rstrip("\n") + "\n\n" + new_section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + new_section + ("\n" + tail if tail else "")
