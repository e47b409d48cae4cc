"""The benchmark behind ``make bench``: fake upstream, one daphne gateway, a bounded load.

Everything runs on 127.0.0.1. The load generator is aiohttp (so the client is not the
bottleneck); each run is bounded by a request count and a duration. The gateway's CPU time per
request comes from its own process accounting (``/proc/<pid>/stat``), its peak RSS from
``VmHWM``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
from cryptography.fernet import Fernet

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROMPT = [{"role": "user", "content": "Say hello"}]


@dataclass(frozen=True, slots=True)
class RunResult:
    """One measured run: one target, one mode, one concurrency."""

    label: str
    stream: bool
    concurrency: int
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    ttfb_p50_ms: float
    cpu_ms_per_request: float | None = None
    upstream_calls: int | None = None  # chat answers the fake upstream gave during the run
    upstream_failed: int | None = None  # of which not a plain success
    upstream_peers: int | None = None  # client connections the fake upstream saw
    loadgen_cpu_ms_per_request: float | None = None  # the load generator's own CPU
    upstream_cpu_ms_per_request: float | None = None  # the fake upstream's CPU

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def calls_per_request(self) -> float | None:
        """Upstream calls per client request (answered or not), when they were counted."""
        issued = self.requests + self.errors
        return self.upstream_calls / issued if self.upstream_calls is not None and issued else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_tree_cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float:
    """User + system CPU time so far of ``pid`` and every live descendant of it (``serve
    --workers N``: the supervisor and its workers), from every process's ``stat`` under
    ``proc`` (its parent and its CPU times); a process that exits meanwhile adds nothing."""
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        parents[int(entry.name)] = int(fields[1])
        seconds[int(entry.name)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    tree, grown = {pid}, True
    while grown:
        added = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= added
        grown = bool(added)
    return sum(seconds.get(member, 0.0) for member in tree)


def _status_mib(pid: int, field: str) -> float:
    match = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else 0.0


def process_peak_rss_mib(pid: int) -> float:
    """Peak resident set size of ``pid`` in MiB (since it started, or since
    :func:`reset_peak_rss`)."""
    return _status_mib(pid, "VmHWM")


def process_rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB, now."""
    return _status_mib(pid, "VmRSS")


def reset_peak_rss(pid: int) -> None:
    """Start ``pid``'s peak resident set size again from its current size (Linux 4.0+)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


async def _one(
    session: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str]
) -> tuple[float, float, bool]:
    started = time.perf_counter()
    async with session.post(url, data=data, headers=headers) as response:
        first = await response.content.readany()
        ttfb = time.perf_counter() - started
        async for _ in response.content.iter_any():
            pass
        ok = response.status == 200 and bool(first)
    return time.perf_counter() - started, ttfb, ok


async def run_load(
    url: str,
    body: dict[str, object],
    headers: dict[str, str],
    *,
    concurrency: int,
    duration: float,
    max_requests: int,
) -> tuple[list[float], list[float], int, float]:
    """Closed-loop load: ``concurrency`` workers until ``duration`` or ``max_requests``.

    The body is serialised once (a 1 MB prompt would otherwise cost the load generator a JSON
    encoding per request); the pool holds one connection per worker.
    """
    data = orjson.dumps(body)
    headers = {"content-type": "application/json", **headers}
    latencies: list[float] = []
    ttfbs: list[float] = []
    errors = 0
    deadline = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline and len(latencies) + errors < max_requests:
                try:
                    latency, ttfb, ok = await _one(session, url, data, headers)
                except aiohttp.ClientError:
                    errors += 1
                    continue
                if ok:
                    latencies.append(latency)
                    ttfbs.append(ttfb)
                else:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, ttfbs, errors, time.perf_counter() - started


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


def summarise(
    label: str,
    stream: bool,
    concurrency: int,
    measured: tuple[list[float], list[float], int, float],
    cpu: float | None,
    upstream: Mapping[str, int] | None = None,
) -> RunResult:
    latencies, ttfbs, errors, seconds = measured
    count = len(latencies)
    return RunResult(
        label,
        stream,
        concurrency,
        count,
        errors,
        seconds,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        statistics.median(ttfbs) * 1000 if ttfbs else 0.0,
        cpu * 1000 / count if cpu is not None and count else None,
        upstream["chat"] if upstream else None,
        upstream["failed"] if upstream else None,
        upstream.get("connections") if upstream else None,
    )


async def fake_stats(
    session: aiohttp.ClientSession, fake_url: str, *, reset: bool = False
) -> dict[str, int]:
    """The fake upstream's counters (``/_fake/stats``); with ``reset``, zeroed first."""
    if reset:
        async with session.post(f"{fake_url}/_fake/reset") as response:
            response.raise_for_status()
    async with session.get(f"{fake_url}/_fake/stats") as response:
        response.raise_for_status()
        return dict(await response.json())


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@contextmanager
def spawned(
    argv: list[str],
    env: dict[str, str],
    port: int,
    *,
    log: Path | None = None,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that must be listening on ``port``; terminated on exit.

    With ``log``, its stderr goes to that file: a pipe nobody reads would block a child that
    logs much (a gateway logging every upstream failure, say) once the pipe buffer is full.
    With ``cwd``, it runs there: another checkout's ``serve`` from before it ran its server
    with ``python -P`` imported the server's code from the working directory.
    """
    with log.open("ab") if log is not None else contextlib.nullcontext() as sink:
        stderr = sink if sink is not None else subprocess.PIPE
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=cwd)
    try:
        wait_for_port(port)
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Terminate ``process``, killed when it has not exited within ``grace`` seconds, and
    reaped."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def gateway_env(data_dir: str) -> dict[str, str]:
    """The embedded default (SQLite in a temporary dir, memory store), DEBUG off."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        OMNIROUTE_DATA_DIR=data_dir,
        OMNIROUTE_DEBUG="0",
        OMNIROUTE_SECRET_KEY="bench-" + os.urandom(16).hex(),
        OMNIROUTE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        OMNIROUTE_LOG_LEVEL="WARNING",
    )
    return env


def tool_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with debug on, for the fake upstream: a checkout installs its development tools
    (and so offers their commands) only with debug on."""
    return {**env, "OMNIROUTE_DEBUG": "1"}


def manage(*args: str, checkout: Path | None = None) -> list[str]:
    """A ``manage.py`` command line: this checkout's with this interpreter by default; with
    ``checkout``, that checkout's ``manage.py`` run by its own ``.venv`` (another version of the
    code, whose modules may live elsewhere, driven only through its commands)."""
    if checkout is None:
        return [sys.executable, str(Path(__file__).resolve().parents[2] / "manage.py"), *args]
    return [str(checkout / ".venv" / "bin" / "python"), str(checkout / "manage.py"), *args]


def seed_gateway(env: dict[str, str], upstream_url: str, checkout: Path | None = None) -> str:
    """Migrate and seed the demo in the bench database (with ``checkout``'s own commands when
    given); return the demo key."""
    migrate = manage("migrate", "--noinput", "-v", "0", checkout=checkout)
    subprocess.run(migrate, env=env, check=True, cwd=checkout)
    output = subprocess.run(
        manage("seeddemo", "--upstream-url", upstream_url, checkout=checkout),
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=checkout,
    ).stdout
    match = re.search(r"sk-omr-[A-Za-z0-9_-]+", output)
    if match is None:
        raise RuntimeError("seeddemo printed no key")
    return match.group(0)


def operator_key(env: dict[str, str]) -> str:
    """A client key with the ``manage`` scope, for the bench's management API calls (the demo
    key cannot manage)."""
    output = subprocess.run(
        manage("createapikey", "--name", "bench-operator", "--scope", "manage"),
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return output.strip().splitlines()[-1]


def temporary_data_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="omniroute-bench-")
