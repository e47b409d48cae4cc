"""``manage.py availability``: random upstream 503s, and how many requests still succeed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.availability import LoadPlan, replace_section, report, run_availability, section


def _rate(value: str) -> float:
    rate = float(value)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{value} is not within 0..1")
    return rate


class Command(BaseCommand):
    help = (
        "Availability under sporadic upstream failures: two connections, then one, each "
        "answering --status to a random --error-rate of calls (all on 127.0.0.1, bounded). "
        "Exits non-zero when a scenario misses its target."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = LoadPlan()
        parser.add_argument("--requests", type=int, default=defaults.requests, help="Per scenario.")
        parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
        parser.add_argument(
            "--duration", type=float, default=defaults.duration, help="Seconds cap."
        )
        parser.add_argument("--error-rate", type=_rate, default=defaults.error_rate)
        parser.add_argument("--status", type=int, default=defaults.status)
        parser.add_argument("--seed", type=int, default=defaults.seed, help="Fake upstream seed.")
        parser.add_argument("--write", action="store_true", help="Update BENCHMARKS.md.")

    def handle(self, *args: Any, **options: Any) -> None:
        plan = LoadPlan(
            requests=options["requests"],
            concurrency=options["concurrency"],
            duration=options["duration"],
            error_rate=options["error_rate"],
            status=options["status"],
            seed=options["seed"],
        )
        results = run_availability(plan)
        self.stdout.write(report(results) + "\n")
        if options["write"]:
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
            path.write_text(replace_section(path.read_text(), section(results, plan, stamp)))
            self.stdout.write(f"Written to {path}.\n")
        failed = [f"{r.scenario.name}: {'; '.join(r.failures())}" for r in results if r.failures()]
        if failed:
            raise CommandError("availability targets missed: " + " | ".join(failed))
