"""``manage.py soak``: mixed load for minutes, and whether the gateway's memory keeps growing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.soak import SoakPlan, replace_section, report, run_soak, section


class Command(BaseCommand):
    help = (
        "Soak one gateway process with streaming and plain chat requests on a healthy fake "
        "upstream (all on 127.0.0.1, bounded by --duration); report its RSS growth in MiB per "
        "minute. Exits non-zero when the growth passes --bound or any request fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = SoakPlan()
        parser.add_argument("--duration", type=float, default=defaults.duration, help="Seconds.")
        parser.add_argument(
            "--warm-up",
            type=float,
            help="Seconds left out of the fit (default: half the duration, at most 30 s).",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=defaults.concurrency,
            help="Clients per loop (one streaming loop, one plain).",
        )
        parser.add_argument(
            "--bound",
            type=float,
            default=defaults.bound_mib_per_minute,
            help="Largest RSS growth that passes, MiB per minute.",
        )
        parser.add_argument("--write", action="store_true", help="Update BENCHMARKS.md.")

    def handle(self, *args: Any, **options: Any) -> None:
        duration = options["duration"]
        if duration <= 0 or options["concurrency"] < 1:
            raise CommandError("--duration and --concurrency must be positive")
        warm_up = options["warm_up"]
        if warm_up is None:
            warm_up = min(30.0, duration / 2)
        plan = SoakPlan(
            duration=duration,
            warm_up=warm_up,
            concurrency=options["concurrency"],
            bound_mib_per_minute=options["bound"],
        )
        result = run_soak(plan)
        self.stdout.write(report(result) + "\n")
        if options["write"]:
            now = dt.datetime.now(dt.UTC)
            path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
            block = section(result, now.strftime("%Y-%m-%d"), now.strftime("%Y-%m-%d %H:%M UTC"))
            path.write_text(replace_section(path.read_text(), block))
            self.stdout.write(f"Written to {path}.\n")
        if result.failures():
            raise CommandError("soak failed: " + "; ".join(result.failures()))
