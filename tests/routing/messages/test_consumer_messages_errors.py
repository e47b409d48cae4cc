"""``POST /v1/messages`` errors through the relay consumer: every one in Anthropic's shape
(``{"type": "error", "error": {"type", "message", "code"}}``), relayed upstream errors scrubbed."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from routing.models import Combo, Provider
from routing.services import api_key_create, combo_save
from tests.routing.format_support import (
    ACME_MODEL,
    CLAUDE_BACKUP,
    CLAUDE_PRIMARY,
    Relay,
    anthropic_error,
    anthropic_shaped,
    bearer,
    message_object,
    messages_request,
    x_api_key,
)
from tests.routing.harness import (
    answer,
    error,
)

pytestmark = pytest.mark.django_db(transaction=True)

# An answer as the provider may format it (indented): relayed as is.
RAW_ANSWER = orjson.dumps(message_object(), option=orjson.OPT_INDENT_2)


# --- 3. errors in Anthropic's shape -----------------------------------------------------------


def altered(**fields: Any) -> bytes:
    """A valid request with ``fields`` changed (``None``: left out)."""
    payload = {**orjson.loads(messages_request()), **fields}
    return orjson.dumps({k: v for k, v in payload.items() if v is not None})


INVALID = {
    "not-json": (b"{not json", "invalid_json"),
    "empty": (b"", "invalid_json"),
    "no-model": (altered(model=None), "missing_model"),
    "model-blank": (altered(model=" "), "missing_model"),
    "no-messages": (altered(messages=None), "missing_messages"),
    "empty-messages": (messages_request(messages=[]), "missing_messages"),
    "max-tokens-zero": (messages_request(max_tokens=0), "invalid_max_tokens"),
    "max-tokens-a-string": (messages_request(max_tokens="64"), "invalid_max_tokens"),
    "max-tokens-a-bool": (messages_request(max_tokens=True), "invalid_max_tokens"),
    "stream-a-string": (altered(stream="yes"), "invalid_stream"),
    "tools-an-object": (altered(tools={"name": "x"}), "invalid_tools"),
}


@pytest.mark.parametrize(("body", "code"), INVALID.values(), ids=INVALID.keys())
async def test_an_invalid_request_is_a_400_in_anthropic_shape_and_asks_no_upstream(
    relay: Relay, first: int, body: bytes, code: str
) -> None:
    reply = await relay.post(body, auth=x_api_key(relay.key))

    assert reply.status == 400
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == ("invalid_request_error", code)
    assert relay.fake.requests == []


@pytest.mark.parametrize(
    ("auth", "code"),
    [
        (x_api_key("sk-not-a-key"), "invalid_api_key"),
        (bearer("sk-not-a-key"), "invalid_api_key"),
        ([], "missing_api_key"),
    ],
    ids=["bad-x-api-key", "bad-bearer", "no-key"],
)
async def test_a_bad_key_is_a_401_in_anthropic_shape(
    relay: Relay, first: int, auth: list[tuple[bytes, bytes]], code: str
) -> None:
    reply = await relay.post(messages_request(), auth=auth)

    assert reply.status == 401
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == ("authentication_error", code)
    assert relay.fake.requests == []


async def test_an_unknown_model_is_a_404_in_anthropic_shape(relay: Relay, first: int) -> None:
    reply = await relay.post(messages_request("nobody/opus"), auth=x_api_key(relay.key))

    assert reply.status == 404
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == ("not_found_error", "model_not_found")
    assert relay.fake.requests == []


async def test_a_model_of_an_openai_format_provider_is_a_404_no_executable_targets(
    relay: Relay, primary: int
) -> None:
    reply = await relay.post(messages_request(ACME_MODEL), auth=x_api_key(relay.key))

    assert reply.status == 404
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == (
        "not_found_error",
        "no_executable_targets",
    )
    diagnostics = reply.json()["diagnostics"]  # kept beside the error object
    assert (diagnostics["wireFormat"], diagnostics["targetFormats"]) == ("anthropic", ["openai"])
    assert relay.fake.requests == []


async def test_a_model_the_key_may_not_use_is_a_403_in_anthropic_shape(
    relay: Relay, pair: tuple[int, int]
) -> None:
    _, narrow = await database_sync_to_async(api_key_create)(
        name="narrow", allowed_models=["claude/haiku"]
    )

    reply = await relay.post(messages_request(), auth=x_api_key(narrow))

    assert reply.status == 403
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == ("permission_error", "model_not_allowed")
    assert relay.fake.requests == []


async def test_a_body_over_the_limit_is_a_413_in_anthropic_shape(
    relay: Relay, first: int, settings: Settings
) -> None:
    settings.MAX_BODY_BYTES = 256

    reply = await relay.post(messages_request(system="x" * 300), auth=x_api_key(relay.key))

    assert reply.status == 413
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == (
        "request_too_large",
        "request_too_large",
    )
    assert relay.fake.requests == []


async def test_a_get_is_a_405_in_anthropic_shape(relay: Relay, first: int) -> None:
    reply = await relay.post(b"", auth=x_api_key(relay.key), method="GET")

    assert (reply.status, reply.headers["allow"]) == (405, "POST")
    assert anthropic_shaped(reply)["code"] == "method_not_allowed"


async def test_an_anthropic_upstream_400_is_relayed_as_it_came(
    relay: Relay, pair: tuple[int, int]
) -> None:
    refused = orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "messages.0.content: Input should be a valid list",
            },
        },
        option=orjson.OPT_INDENT_2,
    )
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: answer(400, refused), CLAUDE_BACKUP: answer(200, RAW_ANSWER)}
    )

    bad = messages_request(messages=[{"role": "user", "content": 3}])
    reply = await relay.post(bad, auth=x_api_key(relay.key))

    assert (reply.status, reply.body) == (400, refused)
    assert relay.fake.calls == [CLAUDE_PRIMARY]  # a client mistake: no failover


async def test_an_openai_shaped_upstream_400_is_rendered_in_anthropic_shape(
    relay: Relay, first: int
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = error(400, "temperature: out of range", "bad_param")

    reply = await relay.post(messages_request(temperature=9), auth=x_api_key(relay.key))

    assert reply.status == 400
    assert reply.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "temperature: out of range",
            "code": "bad_param",
        },
    }


async def test_an_upstream_refusing_the_gateways_key_is_a_502_in_anthropic_shape(
    relay: Relay, first: int
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = anthropic_error(
        401, "authentication_error", f"invalid x-api-key {CLAUDE_PRIMARY}"
    )

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert reply.status == 502
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == ("api_error", "upstream_auth_failed")
    assert CLAUDE_PRIMARY not in reply.body.decode()


async def test_an_upstream_error_page_is_rendered_in_anthropic_shape(
    relay: Relay, first: int
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(
        500, b"<html>Internal Server Error</html>", {"content-type": "text/html"}
    )

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert reply.status == 500
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == ("api_error", "upstream_500")
    assert "Internal Server Error" in error_object["message"]


async def test_an_anthropic_upstream_error_quoting_the_key_is_scrubbed(
    relay: Relay, first: int
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = anthropic_error(
        400, "invalid_request_error", f"bad request for key {CLAUDE_PRIMARY}"
    )

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert reply.status == 400
    message = anthropic_shaped(reply)["message"]
    assert CLAUDE_PRIMARY not in message and "[redacted]" in message


async def test_a_combo_over_both_formats_is_served_by_its_anthropic_targets(
    relay: Relay, acme: Provider, claude: Provider, primary: int, first: int
) -> None:
    def add_combo() -> None:
        targets = [{"provider": acme, "model": "m1"}, {"provider": claude, "model": "opus"}]
        combo_save(combo=Combo(), fields={"name": "mixed"}, targets=targets)

    await database_sync_to_async(add_combo)()
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(200, RAW_ANSWER)

    reply = await relay.post(messages_request("mixed"), auth=x_api_key(relay.key))

    assert (reply.status, reply.connection) == (200, first)
    assert relay.fake.sent == [(CLAUDE_PRIMARY, "opus")]  # acme's target was never a candidate
