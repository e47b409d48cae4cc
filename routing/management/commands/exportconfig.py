"""``manage.py exportconfig``: the whole configuration as YAML (see docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.config_document.texts import export_yaml


class Command(BaseCommand):
    help = (
        "Write providers, connections, combos, client keys (their hashes), rules, the model "
        "catalog, feature flags and the settings as YAML. No ids, no timestamps, no secret: "
        "each secret is written as ${ENV:OMNIROUTE_PROVIDER_SECRET_<NAME>}."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", "-o", help="Write to this file instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        text = export_yaml()
        if options["output"]:
            target = options["output"]
            try:
                Path(target).write_text(text, encoding="utf-8")
            except OSError as error:
                raise CommandError(f"{target}: {error.strerror}") from error
            except ValueError as error:  # a NUL in the path
                raise CommandError(f"{target!r}: {error}") from None
        else:
            self.stdout.write(text, ending="")
