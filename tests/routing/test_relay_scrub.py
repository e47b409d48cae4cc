"""Nothing secret leaves: relayed upstream error bodies are scrubbed.

The client never sees the failing connection's own secret, nor anything shaped like a bearer
token or API key, in a relayed 400 (content policy or other), 413, 422, 403 or 5xx body,
whether the upstream's body was OpenAI-shaped (kept) or not (wrapped).
"""

from __future__ import annotations

import orjson
import pytest

from routing.domain.client.errors import upstream_error_body
from routing.models import Provider
from tests.routing.harness import Gateway, add_connection, answer, error

pytestmark = pytest.mark.django_db(transaction=True)

OWN = "acme-own-credential-0123456789"  # not token-shaped: only the connection knows it
LEAKS = f"key {OWN} and Authorization: Bearer sk-live-abcdefghijklmnop0123 rejected"
REDACTED = "[redacted]"


@pytest.fixture
def primary(acme: Provider) -> int:
    return add_connection(acme, "primary", OWN, priority=10)


def assert_clean(body: bytes) -> None:
    assert OWN.encode() not in body
    assert b"sk-live-" not in body
    assert REDACTED.encode() in body


# --- the pure shaping -----------------------------------------------------------------------


def test_a_shaped_body_keeps_its_shape_and_loses_the_secrets() -> None:
    raw = orjson.dumps({"error": {"message": LEAKS, "type": "invalid_request_error", "code": 7}})

    body = upstream_error_body(400, raw, [OWN])

    assert_clean(body)
    error = orjson.loads(body)["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", 7)
    assert error["message"] == f"key {REDACTED} and Authorization: Bearer {REDACTED} rejected"


def test_a_clean_shaped_body_is_relayed_as_it_came() -> None:
    raw = orjson.dumps({"error": {"message": "bad temperature", "code": "x"}})
    assert upstream_error_body(400, raw, [OWN]) is raw


def test_a_wrapped_body_is_scrubbed_before_it_is_cut() -> None:
    raw = b"x" * 1990 + OWN.encode()  # the cut at 2 000 characters would halve the secret

    message = orjson.loads(upstream_error_body(500, raw, [OWN]))["error"]["message"]

    assert OWN[:10] not in message and message.endswith(REDACTED)


def test_a_json_escaped_secret_is_found_too() -> None:
    secret = "abc/def+ghi/jkl=0123"
    raw = b'{"error": {"message": "key abc\\/def+ghi\\/jkl=0123 is wrong"}}'

    body = upstream_error_body(401, raw, [secret])

    assert orjson.loads(body)["error"]["message"] == f"key {REDACTED} is wrong"


# --- through the consumer -------------------------------------------------------------------


RELAYED = {
    "content policy 400": (400, "content_policy_violation"),
    "other 400": (400, "invalid_value"),
    "413": (413, "request_too_large"),
    "422": (422, "unprocessable"),
    "403": (403, "permission_denied"),
    "500": (500, "server_error"),
}


@pytest.mark.parametrize(("status", "code"), RELAYED.values(), ids=RELAYED.keys())
async def test_the_client_never_sees_the_secret_in_a_relayed_error(
    gateway: Gateway, primary: int, status: int, code: str
) -> None:
    gateway.fake.behaviours[OWN] = error(status, LEAKS, code)

    reply = await gateway.call()

    assert reply.status == status
    assert_clean(reply.body)
    assert reply.json()["error"]["code"] == code


async def test_an_unshaped_error_is_wrapped_and_scrubbed(gateway: Gateway, primary: int) -> None:
    gateway.fake.behaviours[OWN] = answer(
        400, f"<pre>{LEAKS}</pre>".encode(), {"content-type": "text/html"}
    )

    reply = await gateway.call()

    assert reply.status == 400
    assert_clean(reply.body)
    assert reply.json()["error"]["code"] == "upstream_400"
