"""``manage.py seeddemo``: connections to the fake upstream, two combos and a fresh demo key."""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from django.core.management.base import BaseCommand, CommandParser

from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.services import api_key_create, combo_save, connection_save, provider_save

DEMO_KEY_NAME = "demo"
DEMO_MODELS = ["demo-model", "demo-fast"]
FAILOVER_COMBO = "demo-failover"
# The first target of the fail-over combo: a connection whose base URL carries the fake
# upstream's scenario path ``/s/status=404``, so every call answers 404 model_not_found. The
# gateway charges that to the request (nothing is counted or locked) and moves on to the next
# target, so every request through the combo calls both. The connection serves only this
# model: plain ``mock/demo-model`` routes never reach it.
MISSING_MODEL = "demo-missing"
# The same fake upstream speaks Anthropic's Messages API: an Anthropic-format provider over it
# serves /v1/messages (the Anthropic SDK) while ``mock`` serves the OpenAI APIs.
ANTHROPIC_DEMO = "mock-anthropic"


def _scenario_url(url: str, knobs: str) -> str:
    """``url`` with the fake upstream's scenario prefix ``/s/<knobs>`` before its path."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/s/{knobs}{parts.path}"))


class Command(BaseCommand):
    help = (
        "Seed the demo: mock connections, a 'demo' combo, a 'demo-failover' combo whose first "
        "target (connection 'demo-missing') always answers 404, and a new demo API key "
        "(printed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--upstream-url", default="http://127.0.0.1:8100/v1")
        parser.add_argument("--gateway-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        provider = Provider.objects.get(slug="mock")
        url = options["upstream_url"]
        primary = self._connection(provider, "demo-primary", url, 10)
        self._connection(provider, "demo-backup", url, 20)
        missing = self._connection(
            provider, "demo-missing", _scenario_url(url, "status=404"), 30, [MISSING_MODEL]
        )
        answer = {"provider": provider, "connection": primary, "model": "demo-model"}
        self._combo("demo", "Demo combo over the fake upstream", [answer])
        self._combo(
            FAILOVER_COMBO,
            "Fail-over demo: the first target answers 404 model_not_found, the second answers",
            [{"provider": provider, "connection": missing, "model": MISSING_MODEL}, answer],
        )
        claude = Provider.objects.filter(slug=ANTHROPIC_DEMO).first() or Provider(
            slug=ANTHROPIC_DEMO
        )
        claude = provider_save(
            provider=claude,
            fields={"slug": ANTHROPIC_DEMO, "name": "Mock (Anthropic format)",
                    "category": "api_key", "base_url": url, "wire_format": "anthropic"},
        )  # fmt: skip
        self._connection(claude, "demo-claude", url, 10)
        ClientApiKey.objects.filter(name=DEMO_KEY_NAME).delete()
        _, plaintext = api_key_create(name=DEMO_KEY_NAME, scopes=["manage"])
        self._announce(plaintext, options["gateway_url"])

    def _connection(
        self,
        provider: Provider,
        name: str,
        url: str,
        priority: int,
        models: list[str] = DEMO_MODELS,
    ) -> ProviderConnection:
        connection = ProviderConnection.objects.filter(provider=provider, name=name).first()
        fields = {"base_url": url, "priority": priority, "served_models": models}
        return connection_save(
            connection=connection or ProviderConnection(provider=provider, name=name),
            fields=fields,
            secret="demo-upstream-secret",
        )

    def _combo(self, name: str, description: str, targets: list[dict[str, Any]]) -> None:
        combo = Combo.objects.filter(name=name).first() or Combo(name=name)
        combo_save(combo=combo, fields={"description": description}, targets=targets)

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
            "\nThe Anthropic SDK works too (POST /v1/messages):\n"
            f"  anthropic.Anthropic(base_url='{gateway}', api_key='{plaintext}').messages.create("
            f"model='{ANTHROPIC_DEMO}/demo-model', max_tokens=64, "
            "messages=[{'role': 'user', 'content': 'hi'}])\n"
        )
        self.stdout.write(
            f"\nAdmin: {gateway}/admin/ (create a user with `.venv/bin/python manage.py "
            "createsuperuser`)\n\n"
        )
