"""``GET /v1/models`` and ``GET /v1/models/{id}`` through the gateway's own ASGI router, in
process: OpenAI's shape by default, Anthropic's when the client sends ``anthropic-version``
(its errors too), ids with slashes in them, combos, and what a key may not see."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from channels.db import database_sync_to_async

from omniroute.asgi import application
from routing.models import Combo, Provider
from routing.services import api_key_create, combo_save
from tests.routing.format_support import (
    add_anthropic_provider,
    bearer,
    exchange,
    scope_of,
    x_api_key,
)
from tests.routing.harness import Reply, add_connection

# The snapshot is built through database_sync_to_async (another thread), hence transactions.
pytestmark = pytest.mark.django_db(transaction=True)

ROUTER = application.application_mapping["http"]  # omniroute.asgi's URLRouter
ANTHROPIC = [(b"anthropic-version", b"2023-06-01")]
ALL = ["acme/m1", "acme/org/m2", "claude/opus", "team"]
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")  # RFC 3339, as Anthropic writes it


@pytest.fixture
def catalog(fresh_snapshot: None, acme: Provider) -> None:
    """Declared models of two providers (one with a slash in its name) and a combo."""
    add_connection(acme, "primary", "sk-acme-1", served_models=["m1", "org/m2"])
    add_connection(add_anthropic_provider(), "primary", "sk-ant-1", served_models=["opus"])
    combo_save(combo=Combo(), fields={"name": "team"}, targets=[{"provider": acme, "model": "m1"}])


@pytest.fixture
def narrow_key(db: None) -> str:
    """A key that may use ``acme/m1`` only."""
    _, plaintext = api_key_create(name="narrow", allowed_models=["acme/m1"])
    return plaintext


async def get(path: str, headers: list[tuple[bytes, bytes]], method: str = "GET") -> Reply:
    return await exchange(ROUTER, scope_of(method, path, headers))


def anthropic_error(reply: Reply) -> dict[str, Any]:
    body = reply.json()
    assert body["type"] == "error" and isinstance(body["error"], dict)
    return dict(body["error"])


def openai_error(reply: Reply) -> dict[str, Any]:
    body = reply.json()
    assert "type" not in body and isinstance(body["error"], dict)
    return dict(body["error"])


def fresh(stamp: str) -> bool:
    """Whether ``stamp`` is an RFC 3339 instant of the last minute."""
    at = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return STAMP.match(stamp) is not None and abs(datetime.now(UTC) - at).total_seconds() < 60


# --- the list ---------------------------------------------------------------------------------


async def test_the_list_is_in_openai_shape_by_default(catalog: None, plain_key: str) -> None:
    reply = await get("/v1/models", bearer(plain_key))

    assert (reply.status, reply.headers["content-type"]) == (200, "application/json")
    body = reply.json()
    assert set(body) == {"object", "data"} and body["object"] == "list"
    assert [model["id"] for model in body["data"]] == ALL
    assert {model["object"] for model in body["data"]} == {"model"}
    owners = {model["id"]: model["owned_by"] for model in body["data"]}
    assert owners == {
        "acme/m1": "acme",
        "acme/org/m2": "acme",
        "claude/opus": "claude",
        "team": "omniroute",
    }


@pytest.mark.parametrize("auth", [x_api_key, bearer], ids=["x-api-key", "bearer"])
async def test_the_list_is_in_anthropic_shape_for_an_anthropic_client(
    catalog: None, plain_key: str, auth: Any
) -> None:
    reply = await get("/v1/models", auth(plain_key) + ANTHROPIC)

    assert reply.status == 200
    body = reply.json()
    assert set(body) == {"data", "has_more", "first_id", "last_id"}
    assert (body["has_more"], body["first_id"], body["last_id"]) == (False, ALL[0], ALL[-1])
    assert [model["id"] for model in body["data"]] == ALL
    for model in body["data"]:
        assert set(model) == {"type", "id", "display_name", "created_at"}
        assert model["type"] == "model" and model["display_name"] == model["id"]
        assert fresh(model["created_at"])


async def test_an_empty_anthropic_list_has_no_first_or_last_id(
    fresh_snapshot: None, plain_key: str
) -> None:
    reply = await get("/v1/models", x_api_key(plain_key) + ANTHROPIC)

    assert reply.json() == {"data": [], "has_more": False, "first_id": None, "last_id": None}


async def test_the_list_holds_only_what_the_key_may_use(catalog: None, narrow_key: str) -> None:
    reply = await get("/v1/models", bearer(narrow_key))

    assert [model["id"] for model in reply.json()["data"]] == ["acme/m1"]


# --- one model --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "owner"),
    [("acme/m1", "acme"), ("acme/org/m2", "acme"), ("team", "omniroute")],
    ids=["provider-model", "slash-in-the-model", "combo"],
)
async def test_one_model_in_openai_shape(
    catalog: None, plain_key: str, name: str, owner: str
) -> None:
    reply = await get(f"/v1/models/{name}", bearer(plain_key))

    assert reply.status == 200
    body = reply.json()
    assert set(body) == {"id", "object", "created", "owned_by"}
    assert (body["id"], body["object"], body["owned_by"]) == (name, "model", owner)
    assert isinstance(body["created"], int)


@pytest.mark.parametrize("name", ["claude/opus", "acme/org/m2", "team"])
async def test_one_model_in_anthropic_shape(catalog: None, plain_key: str, name: str) -> None:
    reply = await get(f"/v1/models/{name}", x_api_key(plain_key) + ANTHROPIC)

    assert reply.status == 200
    body = reply.json()
    assert set(body) == {"type", "id", "display_name", "created_at"}
    assert (body["type"], body["id"], body["display_name"]) == ("model", name, name)
    assert fresh(body["created_at"])


@pytest.mark.parametrize("name", ["acme/nope", "nobody/m1", "nope"])
async def test_an_unknown_model_is_a_404_in_openai_shape(
    catalog: None, plain_key: str, name: str
) -> None:
    reply = await get(f"/v1/models/{name}", bearer(plain_key))

    assert reply.status == 404
    error_object = openai_error(reply)
    assert error_object["code"] == "model_not_found" and name in error_object["message"]


@pytest.mark.parametrize("name", ["acme/nope", "nope"])
async def test_an_unknown_model_is_a_404_in_anthropic_shape(
    catalog: None, plain_key: str, name: str
) -> None:
    reply = await get(f"/v1/models/{name}", x_api_key(plain_key) + ANTHROPIC)

    assert reply.status == 404
    error_object = anthropic_error(reply)
    assert (error_object["type"], error_object["code"]) == ("not_found_error", "model_not_found")


async def test_a_model_the_key_may_not_use_is_not_found(catalog: None, narrow_key: str) -> None:
    assert (await get("/v1/models/acme/m1", bearer(narrow_key))).status == 200

    reply = await get("/v1/models/acme/org/m2", bearer(narrow_key))

    assert (reply.status, openai_error(reply)["code"]) == (404, "model_not_found")


# --- other errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/acme/m1"])
async def test_a_bad_key_is_a_401_in_the_clients_shape(catalog: None, path: str) -> None:
    openai = await get(path, bearer("sk-not-a-key"))
    anthropic = await get(path, x_api_key("sk-not-a-key") + ANTHROPIC)

    assert (openai.status, openai_error(openai)["code"]) == (401, "invalid_api_key")
    assert anthropic.status == 401
    error_object = anthropic_error(anthropic)
    assert (error_object["type"], error_object["code"]) == (
        "authentication_error",
        "invalid_api_key",
    )


async def test_a_post_is_a_405_in_openai_shape(catalog: None, plain_key: str) -> None:
    reply = await get("/v1/models/acme/m1", bearer(plain_key), method="POST")

    assert (reply.status, reply.headers["allow"]) == (405, "GET")
    assert openai_error(reply)["code"] == "method_not_allowed"


async def test_a_post_from_an_anthropic_client_is_a_405_in_anthropic_shape(
    catalog: None, plain_key: str
) -> None:
    reply = await get("/v1/models", x_api_key(plain_key) + ANTHROPIC, method="POST")

    assert (reply.status, reply.headers["allow"]) == (405, "GET")
    assert anthropic_error(reply)["code"] == "method_not_allowed"


async def test_a_model_of_a_connection_serving_any_model_can_be_retrieved(
    fresh_snapshot: None, acme: Provider, plain_key: str
) -> None:
    await database_sync_to_async(add_connection)(acme, "open", "sk-acme-open")  # serves any

    found = await get("/v1/models/acme/anything", bearer(plain_key))
    missing = await get("/v1/models/nowhere/anything", bearer(plain_key))

    assert (found.status, found.json()["id"]) == (200, "acme/anything")
    assert missing.status == 404
