"""``manage.py createapikey``: create a client API key and print it once."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.services import api_key_create


class Command(BaseCommand):
    help = "Create a client API key; prints the plaintext once (only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--scope", action="append", default=[], help="Repeatable.")
        parser.add_argument("--model", action="append", default=[], help="Allowed model.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            _, plaintext = api_key_create(
                name=options["name"], scopes=options["scope"], allowed_models=options["model"]
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(plaintext)
