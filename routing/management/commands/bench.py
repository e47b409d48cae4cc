"""``manage.py bench``: direct-vs-gateway latency, throughput and gateway CPU per request, and
what a fail-over and a combo with a failing first target cost.

Four targets: ``direct`` (the fake upstream itself), ``gateway`` (``mock/demo-model`` through
the gateway: one upstream call), ``gateway-failover`` (seeddemo's ``demo-failover`` combo:
its first target always answers 404 ``model_not_found``, which the gateway charges to the
request without counting or locking anything, so every request calls the failing target and
then the second one) and ``gateway-combo`` (a priority combo of three targets, created through
the management API as an operator would: the first always answers 503, the second and third
answer; the gateway counts the 503s against that one (connection, model) pair, takes it out
after ``availability.consecutiveFailures`` of them and probes it again when its lock ends, so
most requests skip it without a call). The fake's ``/_fake/stats`` is read around each run, so
the summary shows how many upstream calls each request really made.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from routing.loadgen import (
    RunResult,
    fake_stats,
    free_port,
    gateway_env,
    manage,
    process_cpu_seconds,
    process_peak_rss_mib,
    run_load,
    seed_gateway,
    spawned,
    summarise,
    temporary_data_dir,
)
from routing.management.commands.seeddemo import FAILOVER_COMBO

GATEWAY, FAILOVER, COMBO = "gateway", "gateway-failover", "gateway-combo"
BENCH_COMBO, BENCH_MODEL = "bench-priority", "bench-model"
Target = tuple[str, str, dict[str, str]]  # URL, model, headers

HEADER = (
    "| target | mode | conc | req/s | p50 ms | p99 ms | TTFB p50 ms | gw CPU ms/req | errors |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def _row(r: RunResult) -> str:
    cpu = f"{r.cpu_ms_per_request:.2f}" if r.cpu_ms_per_request is not None else "—"
    mode = "stream" if r.stream else "non-stream"
    return (
        f"| {r.label} | {mode} | {r.concurrency} | {r.rps:.0f} | {r.p50_ms:.2f} | "
        f"{r.p99_ms:.2f} | {r.ttfb_p50_ms:.2f} | {cpu} | {r.errors} |"
    )


def _mode(r: RunResult) -> str:
    return f"{'stream' if r.stream else 'non-stream'} c={r.concurrency}"


def _added_line(direct: RunResult, gateway: RunResult) -> str:
    """What the gateway adds to a direct call."""
    return (
        f"{_mode(gateway)}: added p50 {gateway.p50_ms - direct.p50_ms:.2f} ms,"
        f" added TTFB {gateway.ttfb_p50_ms - direct.ttfb_p50_ms:.2f} ms,"
        f" gateway CPU {gateway.cpu_ms_per_request or 0:.2f} ms/request"
    )


def _failover_line(gateway: RunResult, failover: RunResult) -> str:
    """What a fail-over adds to a plain gateway request, and how many upstream calls each
    fail-over request made (2 when every request called both targets)."""
    cpu = (failover.cpu_ms_per_request or 0) - (gateway.cpu_ms_per_request or 0)
    calls = failover.calls_per_request
    return (
        f"failover {_mode(failover)}: added p50 {failover.p50_ms - gateway.p50_ms:.2f} ms,"
        f" added TTFB {failover.ttfb_p50_ms - gateway.ttfb_p50_ms:.2f} ms,"
        f" added gateway CPU {cpu:.2f} ms/request over the gateway row;"
        f" upstream calls/request {calls or 0:.2f}"
        f" ({failover.upstream_failed} of {failover.upstream_calls} calls failed)"
    )


def _combo_line(direct: RunResult, gateway: RunResult, combo: RunResult) -> str:
    """What the combo adds to a direct call (as the gateway rows say it), what it adds to a
    single-model gateway request, and how many upstream calls each of its requests made."""
    cpu = (combo.cpu_ms_per_request or 0) - (gateway.cpu_ms_per_request or 0)
    return (
        f"combo {_added_line(direct, combo)};"
        f" over the single-model row: p50 {combo.p50_ms - gateway.p50_ms:+.2f} ms,"
        f" CPU {cpu:+.2f} ms/request; upstream calls/request {combo.calls_per_request or 0:.2f}"
        f" ({combo.upstream_failed} of {combo.upstream_calls} calls failed)"
    )


def _seed_combo(gateway_url: str, fake: str, key: str) -> None:
    """Through the management API: three ``mock`` connections and a priority combo over them,
    the first target on the fake's ``/s/status=503`` scenario (a 503 for every call)."""
    connections = [
        ("bench-down", f"{fake}/s/status=503/v1", "bench-down"),
        ("bench-up-1", f"{fake}/v1", BENCH_MODEL),
        ("bench-up-2", f"{fake}/v1", BENCH_MODEL),
    ]
    auth = {"authorization": f"Bearer {key}"}
    with httpx.Client(base_url=gateway_url, headers=auth, timeout=10) as api:
        targets = []
        for priority, (name, url, model) in enumerate(connections, start=40):
            made = api.post(
                "/api/connections/",
                json={"provider": "mock", "name": name, "priority": priority, "base_url": url,
                      "secret": "bench-upstream-secret", "served_models": [model]},
            )  # fmt: skip
            made.raise_for_status()
            targets.append({"provider": "mock", "model": model, "connection": made.json()["id"]})
        combo = {"name": BENCH_COMBO, "strategy": "priority", "targets": targets}
        api.post("/api/combos/", json=combo).raise_for_status()


@dataclass(frozen=True, slots=True)
class _Setup:
    """The processes under test and the bounds of each measured run."""

    gw_pid: int
    fake: str  # the fake upstream's base URL, for its /_fake control endpoints
    duration: float
    max_requests: int


class Command(BaseCommand):
    help = "Benchmark the gateway against the fake upstream (all on 127.0.0.1, bounded)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--duration", type=float, default=5.0, help="Seconds per run.")
        parser.add_argument("--max-requests", type=int, default=30000, help="Cap per run.")
        parser.add_argument("--concurrency", default="1,16,64")
        parser.add_argument("--chunks", type=int, default=20)
        parser.add_argument("--chunk-interval-ms", type=int, default=1)
        parser.add_argument("--record", action="store_true", help="Append to BENCHMARKS.md.")

    def handle(self, *args: Any, **options: Any) -> None:
        levels = [int(c) for c in options["concurrency"].split(",")]
        with temporary_data_dir() as data_dir:
            results, rss = self._run(data_dir, levels, options)
        table = "\n".join([HEADER, *(_row(r) for r in results)])
        summary = self._summary(results, rss)
        self.stdout.write(f"{table}\n\n{summary}\n")
        if options["record"]:
            self._record(table, summary, options)

    def _run(
        self, data_dir: str, levels: list[int], options: dict[str, Any]
    ) -> tuple[list[RunResult], float]:
        env = gateway_env(data_dir)
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage(
            "fakeupstream", "--port", str(fake_port), "--no-record",
            "--chunks", str(options["chunks"]),
            "--chunk-interval-ms", str(options["chunk_interval_ms"]),
        )  # fmt: skip
        fake = f"http://127.0.0.1:{fake_port}"
        key = seed_gateway(env, f"{fake}/v1")
        with (
            spawned(fake_argv, env, fake_port),
            spawned(manage("serve", "--port", str(gw_port)), env, gw_port) as gateway,
        ):
            _seed_combo(f"http://127.0.0.1:{gw_port}", fake, key)
            gw_url, auth = f"http://127.0.0.1:{gw_port}/v1/chat/completions", f"Bearer {key}"
            targets: dict[str, Target] = {
                "direct": (f"{fake}/v1/chat/completions", "demo-model", {}),
                GATEWAY: (gw_url, "mock/demo-model", {"authorization": auth}),
                FAILOVER: (gw_url, FAILOVER_COMBO, {"authorization": auth}),
                COMBO: (gw_url, BENCH_COMBO, {"authorization": auth}),
            }
            setup = _Setup(gateway.pid, fake, options["duration"], options["max_requests"])
            results = asyncio.run(self._measure(targets, levels, setup))
            return results, process_peak_rss_mib(gateway.pid)

    async def _measure(
        self, targets: dict[str, Target], levels: list[int], setup: _Setup
    ) -> list[RunResult]:
        results = []
        async with aiohttp.ClientSession() as control:
            for stream in (False, True):
                for concurrency in levels:
                    for label, target in targets.items():
                        result = await self._measure_one(
                            control, setup, label, target, stream, concurrency
                        )
                        self.stderr.write(_row(result))
                        results.append(result)
        return results

    async def _measure_one(
        self, control: aiohttp.ClientSession, setup: _Setup, label: str, target: Target,
        stream: bool, concurrency: int,
    ) -> RunResult:  # fmt: skip
        """A warm-up, then the measured run with the gateway's CPU and the fake's counters."""
        url, model, headers = target
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        await run_load(url, body, headers, concurrency=concurrency,
                       duration=0.5, max_requests=500)  # fmt: skip
        await fake_stats(control, setup.fake, reset=True)
        before = process_cpu_seconds(setup.gw_pid)
        measured = await run_load(
            url, body, headers, concurrency=concurrency,
            duration=setup.duration, max_requests=setup.max_requests,
        )  # fmt: skip
        cpu = process_cpu_seconds(setup.gw_pid) - before if label.startswith(GATEWAY) else None
        upstream = await fake_stats(control, setup.fake)
        return summarise(label, stream, concurrency, measured, cpu, upstream)

    def _summary(self, results: list[RunResult], rss: float) -> str:
        lines = [f"Gateway peak RSS: {rss:.1f} MiB"]
        runs = {(r.stream, r.concurrency, r.label): r for r in results}
        keys = [(s, c) for s in (False, True) for c in sorted({r.concurrency for r in results})]
        for stream, concurrency in keys:
            direct, gateway = (
                runs.get((stream, concurrency, "direct")),
                runs.get((stream, concurrency, GATEWAY)),
            )
            if direct and gateway:
                lines.append(_added_line(direct, gateway))
        for stream, concurrency in keys:
            gateway, failover = (
                runs.get((stream, concurrency, GATEWAY)),
                runs.get((stream, concurrency, FAILOVER)),
            )
            if gateway and failover:
                lines.append(_failover_line(gateway, failover))
        for stream, concurrency in keys:
            direct, gateway, combo = (
                runs.get((stream, concurrency, label)) for label in ("direct", GATEWAY, COMBO)
            )
            if direct and gateway and combo:
                lines.append(_combo_line(direct, gateway, combo))
        return "\n".join(lines)

    def _record(self, table: str, summary: str, options: dict[str, Any]) -> None:
        path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        section = (
            f"\n## {stamp}\n\n`make bench`: {options['duration']} s per run, "
            f"{options['chunks']} chunks every {options['chunk_interval_ms']} ms when streaming, "
            f"one daphne process, embedded default (SQLite, memory store).\n\n"
            f"{table}\n\n```\n{summary}\n```\n"
        )
        with path.open("a") as handle:
            handle.write(section)
