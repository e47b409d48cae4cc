"""``manage.py chaos``: seeded upstream faults and a Redis kill under a bounded load."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.availability.report import replace_section
from omniroute.tools.chaos.report import failures, report, section
from omniroute.tools.chaos.run import ChaosPlan, run_chaos
from omniroute.tools.redis_server import redis_server_binary


class Command(BaseCommand):
    help = (
        "Chaos: the fake upstream injects resets, timeouts, 503s, 429s with hints, cut and "
        "stalled answers on a seeded schedule, one provider goes down for a while and the run's "
        "own redis-server is killed and restarted, while a bounded load runs through combos and "
        "single models (all on 127.0.0.1). Exits non-zero when a check fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = ChaosPlan()
        parser.add_argument("--requests", type=int, default=defaults.requests)
        parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
        parser.add_argument(
            "--duration", type=float, default=defaults.duration, help="Seconds cap on the load."
        )
        parser.add_argument(
            "--deadline-ms", type=int, default=defaults.deadline_ms, help="Per request."
        )
        parser.add_argument(
            "--recovery-seconds",
            type=float,
            default=defaults.recovery_seconds,
            help="Cap on the recovery phase after the faults stop.",
        )
        parser.add_argument("--seed", type=int, default=defaults.seed, help="Fault schedule seed.")
        parser.add_argument("--write", action="store_true", help="Add the run to BENCHMARKS.md.")

    def handle(self, *args: Any, **options: Any) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise CommandError("redis-server is not installed: the chaos run kills its own Redis")
        plan = ChaosPlan(
            requests=options["requests"],
            concurrency=options["concurrency"],
            duration=options["duration"],
            deadline_ms=options["deadline_ms"],
            recovery_seconds=options["recovery_seconds"],
            seed=options["seed"],
        )
        result = run_chaos(plan, binary)
        self.stdout.write(report(result) + "\n")
        if options["write"]:
            now = dt.datetime.now(dt.UTC)
            title = f"## {now:%Y-%m-%d} — chaos"
            path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
            new = section(result, title, f"{now:%Y-%m-%d %H:%M} UTC")
            path.write_text(replace_section(path.read_text(), new, title))
            self.stdout.write(f"Written to {path}.\n")
        if reasons := failures(result):
            raise CommandError("chaos checks failed: " + " | ".join(reasons))
