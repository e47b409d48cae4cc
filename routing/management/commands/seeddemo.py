"""``manage.py seeddemo``: connections to the fake upstream, two combos and a demo client key.

The demo key is a plain client key (no ``manage`` scope: operators use the admin or a key they
mint). Its plaintext is kept in ``<data dir>/demo-key`` (mode 0600) so that every ``make run``
prints the same, still valid key; a new one is made only when that key no longer works, and an
earlier key is never revoked.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from routing.domain.config.keys import hash_key
from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.services import api_key_create, combo_save, connection_save, provider_save

DEMO_KEY_NAME = "demo"
DEMO_KEY_FILE = "demo-key"
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


def demo_key(key_file: Path) -> tuple[str, bool]:
    """The demo key's plaintext and whether it is new: the one stored in ``key_file`` while its
    key still exists and is usable, else a new key (no scope) written there with mode 0600."""
    try:
        stored = key_file.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        key = ClientApiKey.objects.filter(key_hash=hash_key(stored)).first()
        if key is not None and key.is_usable(timezone.now()):
            return stored, False
    _, plaintext = api_key_create(name=DEMO_KEY_NAME)
    key_file.parent.mkdir(parents=True, exist_ok=True)
    partial = key_file.with_name(f".{key_file.name}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(plaintext + "\n")
    os.chmod(partial, 0o600)  # an existing file keeps its mode through os.open
    partial.replace(key_file)
    return plaintext, True


def _scenario_url(url: str, knobs: str) -> str:
    """``url`` with the fake upstream's scenario prefix ``/s/<knobs>`` before its path."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/s/{knobs}{parts.path}"))


class Command(BaseCommand):
    help = (
        "Seed the demo: mock connections, a 'demo' combo, a 'demo-failover' combo whose first "
        "target (connection 'demo-missing') always answers 404, and a demo API key (printed; "
        "the same one on every run while it is valid)."
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
            fields={
                "slug": ANTHROPIC_DEMO,
                "name": "Mock (Anthropic format)",
                "category": "api_key",
                "base_url": url,
                "wire_format": "anthropic",
            },
        )
        self._connection(claude, "demo-claude", url, 10)
        plaintext, new = demo_key(Path(settings.DATA_DIR) / DEMO_KEY_FILE)
        self._announce(plaintext, new, options["gateway_url"])

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

    def _announce(self, plaintext: str, new: bool, gateway: str) -> None:
        body = {
            "model": "mock/demo-model",
            "stream": True,
            "messages": [{"role": "user", "content": "Say hello"}],
        }
        curl = (
            f"curl -N {gateway}/v1/chat/completions -H 'Authorization: Bearer {plaintext}' "
            f"-H 'Content-Type: application/json' -d {shlex.quote(orjson.dumps(body).decode())}"
        )
        kept = f"new, kept in {DEMO_KEY_FILE}" if new else f"the same as last run, {DEMO_KEY_FILE}"
        self.stdout.write(f"\nDemo API key ({kept}; a client key for /v1):\n  {plaintext}\n")
        self.stdout.write(f"\nTry a streamed answer:\n  {curl}\n")
        self.stdout.write(
            "\nThe Anthropic SDK works too (POST /v1/messages):\n"
            f"  anthropic.Anthropic(base_url='{gateway}', api_key='{plaintext}').messages.create("
            f"model='{ANTHROPIC_DEMO}/demo-model', max_tokens=64, "
            "messages=[{'role': 'user', 'content': 'hi'}])\n"
        )
        self.stdout.write(
            f"\nOperators: the admin at {gateway}/admin/ (create a user with `.venv/bin/python "
            "manage.py createsuperuser`), or the management API at "
            f"{gateway}/api/ (docs: {gateway}/api/docs/) with a key you mint: "
            "`.venv/bin/python manage.py createapikey --name operator --scope manage`. The demo "
            "key cannot manage.\n\n"
        )
