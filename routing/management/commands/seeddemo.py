"""``manage.py seeddemo``: a connection to the fake upstream, a combo and a fresh demo key."""

from __future__ import annotations

import shlex
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandParser

from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.services import api_key_create, combo_save, connection_save

DEMO_KEY_NAME = "demo"
DEMO_MODELS = ["demo-model", "demo-fast"]


class Command(BaseCommand):
    help = "Seed the demo: mock connections, a 'demo' combo and a new demo API key (printed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--upstream-url", default="http://127.0.0.1:8100/v1")
        parser.add_argument("--gateway-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        provider = Provider.objects.get(slug="mock")
        primary = self._connection(provider, "demo-primary", options["upstream_url"], 10)
        self._connection(provider, "demo-backup", options["upstream_url"], 20)
        combo = Combo.objects.filter(name="demo").first() or Combo(name="demo")
        combo_save(
            combo=combo,
            fields={"description": "Demo combo over the fake upstream"},
            targets=[{"provider": provider, "model": "demo-model", "connection": primary}],
        )
        ClientApiKey.objects.filter(name=DEMO_KEY_NAME).delete()
        _, plaintext = api_key_create(name=DEMO_KEY_NAME, scopes=["manage"])
        self._announce(plaintext, options["gateway_url"])

    def _connection(
        self, provider: Provider, name: str, url: str, priority: int
    ) -> ProviderConnection:
        connection = ProviderConnection.objects.filter(provider=provider, name=name).first()
        fields = {"base_url": url, "priority": priority, "served_models": DEMO_MODELS}
        return connection_save(
            connection=connection or ProviderConnection(provider=provider, name=name),
            fields=fields,
            secret="demo-upstream-secret",
        )

    def _announce(self, plaintext: str, gateway: str) -> None:
        body = {
            "model": "mock/demo-model",
            "stream": True,
            "messages": [{"role": "user", "content": "Say hello"}],
        }
        curl = (
            f"curl -N {gateway}/v1/chat/completions -H 'Authorization: Bearer {plaintext}' "
            f"-H 'Content-Type: application/json' -d {shlex.quote(orjson.dumps(body).decode())}"
        )
        self.stdout.write(
            f"\nDemo API key (shown once, also has the 'manage' scope):\n  {plaintext}\n"
        )
        self.stdout.write(f"\nTry a streamed answer:\n  {curl}\n")
        self.stdout.write(
            f"\nAdmin: {gateway}/admin/ (create a user with `.venv/bin/python manage.py "
            "createsuperuser`)\n\n"
        )
