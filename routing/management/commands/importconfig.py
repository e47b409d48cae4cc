"""``manage.py importconfig``: apply a configuration file (see docs/configuration.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from routing.config_document.applying import config_import
from routing.config_document.errors import ConfigError
from routing.config_document.texts import document_from_yaml


class Command(BaseCommand):
    help = (
        "Apply a YAML configuration in one transaction: create and update what differs "
        "(a second run changes nothing). Secret references ${ENV:OMNIROUTE_PROVIDER_SECRET_*} "
        "are read from the environment."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The YAML file (from exportconfig, or written by hand).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would change; change nothing."
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Also remove objects that a section of the file no longer lists.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["file"]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as error:
            raise CommandError(f"{source}: {error.strerror}") from error
        except UnicodeDecodeError:
            raise CommandError(f"{source}: not UTF-8 text") from None
        except ValueError as error:  # a NUL in the path
            raise CommandError(f"{source!r}: {error}") from None
        try:
            document, lines = document_from_yaml(text)
            plan = config_import(
                document,
                lines=lines,
                environment=os.environ,
                prune=options["prune"],
                dry_run=options["dry_run"],
                now=timezone.now(),
            )
        except ConfigError as error:
            raise CommandError(error.describe(source)) from error
        for line in plan.lines() or ["no changes"]:
            self.stdout.write(line)
        if plan and options["dry_run"]:
            self.stdout.write("(dry run: nothing was changed)")
