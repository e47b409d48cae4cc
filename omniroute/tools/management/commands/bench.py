"""``manage.py bench``: latency, throughput and gateway CPU per request, phase by phase.

The phases live in ``omniroute.tools.bench`` (``base``, ``bare-workers``, ``scale``, ``prompt``,
``concurrency``, ``lists``); ``--only`` picks some, in that order (all but ``bare-workers`` by
default). ``lists`` needs no gateway: it times the
management API's paginated lists in a child process with its own temporary database. Everything
runs on 127.0.0.1, each run bounded by a duration and a request cap. ``--record`` appends a
dated section to BENCHMARKS.md.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import textwrap
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.bench import bare_workers, base, concurrency, lists, prompt, scale
from omniroute.tools.bench.harness import Bench, Bounds, started
from omniroute.tools.bench.report import PhaseReport, render, section
from omniroute.tools.loadgen import process_peak_rss_mib

PHASES = ("base", "bare-workers", "scale", "prompt", "concurrency", "lists")
DEFAULT_PHASES = ("base", "scale", "prompt", "concurrency", "lists")  # bare-workers on request
LISTS = "lists"  # the one phase that runs without the gateway and the fake upstream


def _levels(text: str) -> tuple[int, ...]:
    return tuple(int(c) for c in text.split(","))


class Command(BaseCommand):
    help = "Benchmark the gateway against the fake upstream (all on 127.0.0.1, bounded)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--only", default=",".join(DEFAULT_PHASES), help="Phases, comma-separated."
        )
        parser.add_argument("--duration", type=float, default=5.0, help="Seconds per run.")
        parser.add_argument("--max-requests", type=int, default=30000, help="Cap per run.")
        parser.add_argument("--concurrency", default="1,16,64", help="The base phase's levels.")
        parser.add_argument("--sweep", default="1,16,64,128,256", help="The concurrency phase's.")
        parser.add_argument("--connections", type=int, default=100, help="The scale phase's.")
        parser.add_argument("--list-connections", type=int, default=5000, help="The lists phase's.")
        parser.add_argument("--list-rounds", type=int, default=15, help="Requests per list.")
        parser.add_argument("--prompt-bytes", type=int, default=1_000_000)
        parser.add_argument("--rounds", type=int, default=3, help="Runs per scale/prompt row.")
        parser.add_argument("--chunks", type=int, default=20)
        parser.add_argument("--chunk-interval-ms", type=int, default=1)
        parser.add_argument("--record", action="store_true", help="Append to BENCHMARKS.md.")
        parser.add_argument("--title", help="The recorded section's title (default: phases').")

    def handle(self, *args: Any, **options: Any) -> None:
        phases = [p for p in options["only"].split(",") if p]
        if unknown := set(phases) - set(PHASES):
            raise CommandError(f"unknown phase(s): {', '.join(sorted(unknown))}")
        bounds = Bounds(
            options["duration"],
            options["max_requests"],
            _levels(options["concurrency"]),
            _levels(options["sweep"]),
            options["connections"],
            options["prompt_bytes"],
            max(1, options["rounds"]),
        )
        phases = [p for p in PHASES if p in phases]
        served = [p for p in phases if p != LISTS]
        reports: list[PhaseReport] = []
        rss = None
        if served:
            chunking = (options["chunks"], options["chunk_interval_ms"])
            with_bare = bool({"base", "bare-workers"} & set(served))
            with started(
                bounds, *chunking, progress=self.stderr.write, with_bare=with_bare
            ) as bench:
                self._prepare(bench, served)
                reports = asyncio.run(self._measure(bench, served))
                rss = process_peak_rss_mib(bench.gw_pid)
        if LISTS in phases:
            self.stderr.write(f"lists: seeding {options['list_connections']} connections")
            rounds = max(1, options["list_rounds"])
            reports.append(lists.run(options["list_connections"], rounds))
        body = render(reports, rss)
        self.stdout.write(body)
        if options["record"]:
            title = options["title"] or self._title(phases, bounds, options["list_connections"])
            self._record(body, title, options)

    def _prepare(self, bench: Bench, phases: list[str]) -> None:
        """Seed what the phases need, through the management API as an operator would."""
        with bench.management() as api:
            if "base" in phases:
                base.prepare(api, bench.fake)
            if "scale" in phases:
                scale.prepare(api, bench.fake, bench.bounds.connections)

    async def _measure(self, bench: Bench, phases: list[str]) -> list[PhaseReport]:
        runners = {
            "base": base.run,
            "bare-workers": bare_workers.run,
            "scale": scale.run,
            "prompt": prompt.run,
            "concurrency": concurrency.run,
        }
        try:
            return [await runners[phase](bench) for phase in phases]
        finally:
            await bench.close()

    def _title(self, phases: list[str], bounds: Bounds, list_connections: int) -> str:
        titles = {
            "base": base.TITLE,
            "bare-workers": bare_workers.TITLE,
            "scale": scale.title(bounds.connections),
            "prompt": prompt.title(bounds.prompt_bytes),
            "concurrency": concurrency.title(bounds.sweep),
            LISTS: lists.title(list_connections),
        }
        return ", ".join(titles[p] for p in phases)

    def _record(self, body: str, title: str, options: dict[str, Any]) -> None:
        now = dt.datetime.now(dt.UTC)
        command = f"manage.py bench --only {options['only']}"
        intro = (
            f"`{command}` at {now:%H:%M} UTC:"
            f" {options['duration']} s per run (at most {options['max_requests']} requests),"
            f" {options['rounds']} rounds per scale/prompt row, {options['chunks']} chunks"
            f" every {options['chunk_interval_ms']} ms when streaming; one daphne process,"
            " embedded default (SQLite, memory store)."
        )
        if LISTS in options["only"].split(","):
            lists_note = (
                f"The lists phase: {options['list_rounds']} requests per list after a warm-up,"
                " timed in-process in a child with its own SQLite database and memory store."
            )
            served = set(options["only"].split(",")) - {LISTS}
            intro = (
                f"{intro} {lists_note}"
                if served
                else f"`{command}` at {now:%H:%M} UTC. {lists_note}"
            )
        path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
        with path.open("a") as handle:
            handle.write(section(f"{now:%Y-%m-%d}", title, textwrap.fill(intro, 96), body))
