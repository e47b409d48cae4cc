"""``manage.py restarttest``: kill -9 the gateway under load, restart it, compare its state."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.restart.check import Outcome, Services, run_mode
from omniroute.tools.restart.infra import reachable

DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"


def _line(outcome: Outcome) -> str:
    if outcome.skipped is not None:
        return f"{outcome.mode}: SKIPPED ({outcome.skipped})"
    verdict = "PASS" if outcome.passed else "FAIL"
    return (
        f"{outcome.mode}: {verdict}: {outcome.checked} states compared; load before the kill "
        f"{outcome.load_ok} answered, {outcome.load_failed} cut {outcome.load_reasons}; after "
        "the restart "
        f"{outcome.after_ok} answered, {outcome.after_failed} failed; kill to serving "
        f"{outcome.kill_to_serving_s:.1f} s; run {outcome.seconds:.1f} s"
    )


class Command(BaseCommand):
    help = (
        "Kill -9 the gateway under load and start it again on the same data, on the embedded "
        "default (SQLite + memory store) and on PostgreSQL + Redis (a database and a key "
        "prefix of its own, removed afterwards); open breakers, cooldowns, terminal states, "
        "model locks and leases must be as they were. Exits non-zero on any difference. "
        "The PostgreSQL + Redis run skips when those servers are unreachable (fails when "
        "CI=true)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--mode", choices=("embedded", "services", "both"), default="both")
        parser.add_argument(
            "--pg-url",
            default=os.environ.get("CI_DATABASE_URL", DEFAULT_PG),
            help="A PostgreSQL server (the run creates and drops its own database there).",
        )
        parser.add_argument("--redis-url", default=os.environ.get("CI_REDIS_URL", DEFAULT_REDIS))

    def handle(self, *args: Any, **options: Any) -> None:
        outcomes = []
        logs = Path(tempfile.mkdtemp(prefix="omniroute-restarttest-logs-"))  # kept on failure
        if options["mode"] in ("embedded", "both"):
            outcomes.append(self._run("embedded", None, logs))
        if options["mode"] in ("services", "both"):
            services = Services(options["pg_url"], options["redis_url"])
            absent = reachable(services)
            if absent is None:
                outcomes.append(self._run("postgres+redis", services, logs))
            elif os.environ.get("CI") == "true":
                failure = f"PostgreSQL or Redis unreachable (required when CI=true): {absent}"
                outcomes.append(Outcome("postgres+redis", problems=[failure]))
            else:
                outcomes.append(Outcome("postgres+redis", skipped=f"unreachable: {absent}"))
                self.stdout.write(_line(outcomes[-1]) + "\n")
        failed = [o for o in outcomes if o.skipped is None and not o.passed]
        if not failed:
            shutil.rmtree(logs, ignore_errors=True)
            return
        details = "; ".join(p for o in failed for p in o.problems)
        raise CommandError(f"restart test failed: {details} (gateway logs: {logs})")

    def _run(self, mode: str, services: Services | None, logs: Path) -> Outcome:
        try:
            outcome = run_mode(mode, services, logs)
        except Exception as error:  # a run that cannot finish fails; the other mode still runs
            outcome = Outcome(mode, problems=[f"run aborted: {type(error).__name__}: {error}"])
        self.stdout.write(_line(outcome) + "\n")
        for problem in outcome.problems:
            self.stdout.write(f"  - {problem}\n")
        return outcome
