"""``manage.py bench``: direct-vs-gateway latency, throughput and gateway CPU per request."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from routing.loadgen import (
    RunResult,
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
        key = seed_gateway(env, f"http://127.0.0.1:{fake_port}/v1")
        with (
            spawned(fake_argv, env, fake_port),
            spawned(manage("serve", "--port", str(gw_port)), env, gw_port) as gateway,
        ):
            targets = {
                "direct": (f"http://127.0.0.1:{fake_port}/v1/chat/completions", "demo-model", {}),
                "gateway": (
                    f"http://127.0.0.1:{gw_port}/v1/chat/completions",
                    "mock/demo-model",
                    {"authorization": f"Bearer {key}"},
                ),
            }
            results = asyncio.run(self._measure(targets, levels, gateway.pid, options))
            return results, process_peak_rss_mib(gateway.pid)

    async def _measure(
        self, targets: dict[str, Any], levels: list[int], gw_pid: int, options: dict[str, Any]
    ) -> list[RunResult]:
        results = []
        for stream in (False, True):
            for concurrency in levels:
                for label, (url, model, headers) in targets.items():
                    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                    body["stream"] = stream
                    await run_load(url, body, headers, concurrency=concurrency,
                                   duration=0.5, max_requests=500)  # fmt: skip
                    before = process_cpu_seconds(gw_pid)
                    measured = await run_load(
                        url, body, headers, concurrency=concurrency,
                        duration=options["duration"], max_requests=options["max_requests"],
                    )  # fmt: skip
                    cpu = process_cpu_seconds(gw_pid) - before if label == "gateway" else None
                    result = summarise(label, stream, concurrency, measured, cpu)
                    self.stderr.write(_row(result))
                    results.append(result)
        return results

    def _summary(self, results: list[RunResult], rss: float) -> str:
        lines = [f"Gateway peak RSS: {rss:.1f} MiB"]
        pairs = {(r.stream, r.concurrency, r.label): r for r in results}
        for stream in (False, True):
            for concurrency in sorted({r.concurrency for r in results}):
                direct = pairs.get((stream, concurrency, "direct"))
                gateway = pairs.get((stream, concurrency, "gateway"))
                if direct and gateway:
                    mode = "stream" if stream else "non-stream"
                    added = gateway.p50_ms - direct.p50_ms
                    lines.append(
                        f"{mode} c={concurrency}: added p50 {added:.2f} ms,"
                        f" added TTFB {gateway.ttfb_p50_ms - direct.ttfb_p50_ms:.2f} ms,"
                        f" gateway CPU {gateway.cpu_ms_per_request or 0:.2f} ms/request"
                    )
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
