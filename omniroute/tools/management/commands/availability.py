"""``manage.py availability``: random upstream 503s and hinted 429s, and how many requests
still succeed (beside a direct client's share under the same 429s)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.availability.report import replace_section, report, section
from omniroute.tools.availability.run import run_availability
from omniroute.tools.availability.scenarios import LoadPlan, failures


def _rate(value: str) -> float:
    rate = float(value)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{value} is not within 0..1")
    return rate


class Command(BaseCommand):
    help = (
        "Availability under sporadic upstream failures (all on 127.0.0.1, bounded): two "
        "connections, then one, each answering --status to a random --error-rate of calls; "
        "then 429 with Retry-After on a random --hinted-rate of calls, straight to the upstream "
        "(the direct baseline), then through one and two connections with the provider's "
        "per_model_quota on and off. Exits non-zero when a scenario misses its target."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = LoadPlan()
        parser.add_argument("--requests", type=int, default=defaults.requests, help="Per scenario.")
        parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
        parser.add_argument(
            "--duration", type=float, default=defaults.duration, help="Seconds cap per scenario."
        )
        parser.add_argument("--error-rate", type=_rate, default=defaults.error_rate)
        parser.add_argument("--status", type=int, default=defaults.status)
        parser.add_argument(
            "--hinted-rate",
            type=_rate,
            default=defaults.hinted_rate,
            help="Share of calls answering 429 with a Retry-After in the hinted scenarios.",
        )
        parser.add_argument(
            "--retry-after", type=int, default=defaults.retry_after, help="Seconds, hinted 429."
        )
        parser.add_argument("--hinted-concurrency", type=int, default=defaults.hinted_concurrency)
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
            hinted_rate=options["hinted_rate"],
            retry_after=options["retry_after"],
            hinted_concurrency=options["hinted_concurrency"],
        )
        results = run_availability(plan)
        self.stdout.write(report(results) + "\n")
        if options["write"]:
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
            path.write_text(replace_section(path.read_text(), section(results, plan, stamp)))
            self.stdout.write(f"Written to {path}.\n")
        if failed := failures(results):
            raise CommandError("availability targets missed: " + " | ".join(failed))
