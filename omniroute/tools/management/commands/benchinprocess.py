"""``manage.py benchinprocess``: the gateway's and the bare proxy's CPU per request, both driven in
one process without a server; with ``--instructions``, the machine instructions each executes
per request, counted under valgrind's callgrind (``omniroute.tools.bench.inprocess``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.bench.inprocess import (
    Options,
    count_instructions,
    render,
    render_instructions,
    run,
)

# Under callgrind a request takes about fifty times as long: fewer of them, one at a time.
COUNTED_REQUESTS, COUNTED_CONCURRENCY = 1000, 1
TIMED_REQUESTS, TIMED_CONCURRENCY = 4000, 16


class Command(BaseCommand):
    help = "The gateway's own CPU per request against the bare proxy's, in one process."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stream", action="store_true", help="Streamed answers.")
        parser.add_argument(
            "--instructions",
            action="store_true",
            help="Count machine instructions per request under callgrind (needs valgrind).",
        )
        parser.add_argument("--concurrency", type=int, help="16; with --instructions, 1.")
        parser.add_argument(
            "--requests", type=int, help="Requests per round (4000; with --instructions, 1000)."
        )
        parser.add_argument("--rounds", type=int, default=8, help="Rounds per application.")

    def handle(self, *args: Any, **options: Any) -> None:
        counted = bool(options["instructions"])
        concurrency = options["concurrency"] or (
            COUNTED_CONCURRENCY if counted else TIMED_CONCURRENCY
        )
        requests = options["requests"] or (COUNTED_REQUESTS if counted else TIMED_REQUESTS)
        chosen = Options(
            stream=bool(options["stream"]),
            concurrency=max(1, concurrency),
            requests=max(1, requests),
            rounds=max(1, options["rounds"]),
        )
        if not counted:
            self.stdout.write(render(chosen, run(chosen, self.stderr.write)))
            return
        try:
            result = count_instructions(chosen, self.stderr.write)
        except RuntimeError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(render_instructions(chosen, result))
