"""``manage.py benchinprocess``: the gateway's and the bare proxy's CPU per request, both driven in
one process without a server (``omniroute.tools.bench.inprocess``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from omniroute.tools.bench.inprocess import Options, render, run


class Command(BaseCommand):
    help = "The gateway's own CPU per request against the bare proxy's, in one process."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stream", action="store_true", help="Streamed answers.")
        parser.add_argument("--concurrency", type=int, default=16)
        parser.add_argument("--requests", type=int, default=4000, help="Requests per round.")
        parser.add_argument("--rounds", type=int, default=8, help="Rounds per application.")

    def handle(self, *args: Any, **options: Any) -> None:
        chosen = Options(
            stream=bool(options["stream"]),
            concurrency=max(1, options["concurrency"]),
            requests=max(1, options["requests"]),
            rounds=max(1, options["rounds"]),
        )
        self.stdout.write(render(chosen, run(chosen, self.stderr.write)))
