"""``manage.py serve``: run the gateway under daphne (on uvloop when it is installed).

It first collects the static files (admin, browsable API, API docs) into ``STATIC_ROOT``, where
WhiteNoise serves them whatever ``DEBUG`` says; ``--no-collectstatic`` skips that when a
deployment collected them at build time.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve the gateway (admin, API and /v1 proxy) with daphne."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--access-log", action="store_true", help="Log every request.")
        parser.add_argument(
            "--no-collectstatic",
            dest="collectstatic",
            action="store_false",
            help="Serve the static files already in STATIC_ROOT without collecting them first.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["collectstatic"]:
            call_command("collectstatic", interactive=False, verbosity=0)
        argv = ["-b", options["host"], "-p", str(options["port"]), "--proxy-headers"]
        argv += ["--access-log", "-"] if options["access_log"] else ["-v", "0"]
        # A fresh interpreter: the event loop policy must be set before daphne's reactor exists.
        python = sys.executable
        os.execv(python, [python, "-m", "omniroute.server", *argv, "omniroute.asgi:application"])
