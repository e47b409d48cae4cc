"""Combo resolution through the chat consumer: targets the catalog says cannot serve a request
are never asked, nested combos and wildcards answer."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async

from routing.models import Combo, ModelCatalogEntry, Provider
from routing.services import catalog_entry_save, combo_save
from tests.routing.harness import (
    OK,
    PRIMARY,
    Gateway,
    Reply,
    add_connection,
    chat,
    communicator,
    read_reply,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)


def setup(acme: Provider, targets: list[str], catalog: dict[str, dict[str, Any]]) -> int:
    """One connection of ``acme`` serving any model (its id returned), combo ``team`` over
    ``targets`` (an ``acme`` model, or ``combo:<name>``), and catalog entries for acme's
    models."""
    primary = add_connection(acme, "primary", PRIMARY, priority=10)
    steps: list[dict[str, Any]] = [
        {"combo_ref": Combo.objects.get(name=t.removeprefix("combo:"))}
        if t.startswith("combo:")
        else {"provider": acme, "model": t}
        for t in targets
    ]
    combo_save(combo=Combo(), fields={"name": "team"}, targets=steps)
    for model, fields in catalog.items():
        catalog_entry_save(entry=ModelCatalogEntry(provider=acme, model=model), fields=fields)
    return primary


async def ask(gateway: Gateway, body: bytes) -> Reply:
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, body)
    return await read_reply(comm)


async def test_a_model_too_small_for_the_prompt_is_never_asked(
    gateway: Gateway, acme: Provider
) -> None:
    catalog = {"small": {"context_window": 50}, "large": {"context_window": 100_000}}
    await database_sync_to_async(setup)(acme, ["small", "large"], catalog)
    gateway.fake.behaviours[PRIMARY] = OK

    reply = await ask(gateway, chat("team", content="x" * 400))  # about 100 tokens

    assert reply.status == 200
    assert gateway.fake.sent == [(PRIMARY, "large")]
    primary = reply.connection
    assert reply.decision()["skipped"] == f"acme/small@{primary}:context_window"


async def test_a_prompt_too_big_for_every_target_is_404_without_an_upstream_call(
    gateway: Gateway, acme: Provider
) -> None:
    catalog = {"small": {"context_window": 50}}
    primary = await database_sync_to_async(setup)(acme, ["small"], catalog)
    gateway.fake.behaviours[PRIMARY] = OK

    reply = await ask(gateway, chat("team", content="x" * 400))

    assert reply.status == 404
    body = reply.json()
    assert body["error"]["code"] == "context_requirements_exhausted"
    skipped = {
        "provider": "acme",
        "model": "small",
        "connection": primary,
        "reasons": ["context_window"],
    }
    assert body["diagnostics"]["skipped"] == [skipped]
    assert gateway.fake.requests == []


async def test_tools_on_a_tool_less_model_are_400_capability_mismatch(
    gateway: Gateway, acme: Provider
) -> None:
    await database_sync_to_async(setup)(acme, ["plain"], {"plain": {"supports_tools": False}})
    gateway.fake.behaviours[PRIMARY] = OK
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    body = {"model": "team", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}

    reply = await ask(gateway, orjson.dumps(body))

    assert (reply.status, reply.json()["error"]["code"]) == (400, "capability_mismatch")
    assert gateway.fake.requests == []


async def test_a_nested_combo_with_a_wildcard_answers(gateway: Gateway, acme: Provider) -> None:
    def nested() -> None:
        inner = Combo(name="inner")
        combo_save(combo=inner, targets=[{"provider": acme, "model": "m-*"}])
        setup(acme, ["combo:inner"], {"m-beta": {}, "m-alpha": {}, "other": {}})

    await database_sync_to_async(nested)()
    gateway.fake.behaviours[PRIMARY] = OK

    reply = await ask(gateway, chat("team"))

    assert reply.status == 200
    assert gateway.fake.sent == [(PRIMARY, "m-alpha")]  # the catalog's matches, by name
