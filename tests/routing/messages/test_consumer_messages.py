"""``POST /v1/messages`` through the relay consumer, in process: Anthropic clients (``x-api-key``
or a Bearer key, their ``anthropic-version`` and ``anthropic-beta`` passed on), answers relayed
as they came from the provider's ``/messages`` called with the connection's ``x-api-key``,
every error in Anthropic's shape, failover and the pair's failure record as for chat, and
streams: failed over unseen before the first token, ended with an in-band ``error`` event after
it, finished with ``message_stop`` when the upstream forgot it.

``FormatUpstream`` plays the upstream and a ``MemoryStore`` on a fake clock holds the state
(tests/routing/format_support.py); ``claude`` speaks Anthropic's wire format, ``acme`` OpenAI's.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from resilience.services.lockout_operations import lockout_list
from tests.routing.format_support import (
    CLAUDE_BACKUP,
    CLAUDE_PRIMARY,
    TEXT,
    Relay,
    anthropic_error,
    anthropic_shaped,
    bearer,
    message_object,
    messages_events,
    messages_request,
    messages_text,
    x_api_key,
)
from tests.routing.harness import (
    UNAVAILABLE,
    Behaviour,
    answer,
)
from tests.routing.stream_support import streaming

pytestmark = pytest.mark.django_db(transaction=True)

BASE_SECONDS = 2  # availability.transientCooldownBaseMs: the first self-set lock
MESSAGES_URL = "http://claude.test/v1/messages"
DEFAULT_VERSION = "2023-06-01"
# An answer as the provider may format it (indented): relayed as is.
RAW_ANSWER = orjson.dumps(message_object(), option=orjson.OPT_INDENT_2)
OVERLOADED = anthropic_error(529, "overloaded_error", "Overloaded")


# --- 1 and 2. success, and what the upstream is sent ------------------------------------------


@pytest.mark.parametrize("auth", [x_api_key, bearer], ids=["x-api-key", "bearer"])
async def test_a_plain_answer_is_relayed_byte_for_byte_from_the_messages_path(
    relay: Relay, first: int, auth: Any
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(200, RAW_ANSWER)
    body = messages_request(system="Be brief.", temperature=0.2)
    client_headers = [(b"anthropic-version", b"2023-01-01"), (b"anthropic-beta", b"tools-1")]

    reply = await relay.post(body, auth=auth(relay.key), headers=client_headers)

    assert (reply.status, reply.body) == (200, RAW_ANSWER)
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["x-omniroute-request-id"]
    assert (reply.decision()["provider"], reply.connection) == ("claude", first)
    (sent,) = relay.fake.requests
    assert (sent.method, str(sent.url)) == ("POST", MESSAGES_URL)
    assert orjson.loads(sent.content) == {**orjson.loads(body), "model": "opus"}
    # the connection's key, as Anthropic wants it; the client's own never
    assert sent.headers["x-api-key"] == CLAUDE_PRIMARY
    assert "authorization" not in sent.headers
    assert relay.key.encode() not in repr(sent.headers.raw).encode()
    # the client's API version and betas, once each
    assert sent.headers.get_list("anthropic-version") == ["2023-01-01"]
    assert sent.headers.get_list("anthropic-beta") == ["tools-1"]


async def test_without_a_client_version_the_upstream_gets_the_default_one(
    relay: Relay, first: int
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(200, RAW_ANSWER)

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert reply.status == 200
    (sent,) = relay.fake.requests
    assert sent.headers.get_list("anthropic-version") == [DEFAULT_VERSION]
    assert "anthropic-beta" not in sent.headers


async def test_other_client_headers_stay_with_the_gateway(relay: Relay, first: int) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(200, RAW_ANSWER)
    client_headers = [(b"cookie", b"c=1"), (b"x-session-id", b"s1"), (b"x-api-key", b"sk-other")]

    await relay.post(messages_request(), headers=client_headers)

    (sent,) = relay.fake.requests
    assert sent.headers.get_list("x-api-key") == [CLAUDE_PRIMARY]
    assert not {"cookie", "x-session-id"} & set(sent.headers.keys())


async def test_every_anthropic_beta_header_reaches_the_upstream(relay: Relay, first: int) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(200, RAW_ANSWER)
    betas = [(b"anthropic-beta", b"tools-1"), (b"anthropic-beta", b"cache-2")]

    await relay.post(messages_request(), auth=x_api_key(relay.key), headers=betas)

    (sent,) = relay.fake.requests
    sent_betas = {b.strip() for v in sent.headers.get_list("anthropic-beta") for b in v.split(",")}
    assert sent_betas == {"tools-1", "cache-2"}


async def test_a_passed_header_that_is_not_ascii_is_the_clients_400(
    relay: Relay, first: int
) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(200, RAW_ANSWER)
    beta = [(b"anthropic-beta", b"tools-\xe9")]  # Latin-1: no upstream could be sent it as written

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key), headers=beta)

    assert reply.status == 400
    assert reply.json()["type"] == "error"  # Anthropic's shape, as every /v1/messages error
    assert reply.json()["error"]["code"] == "invalid_header"
    assert "anthropic-beta" in reply.json()["error"]["message"]
    assert relay.fake.requests == []


async def test_a_stream_is_relayed_byte_for_byte(relay: Relay, first: int) -> None:
    events = messages_events()
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming(events)

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.connection == first
    assert reply.body == b"".join(events)  # the ping and message_stop included, nothing added
    assert reply.chunks[-1] == b""
    assert messages_text(reply) == "".join(TEXT)
    (sent,) = relay.fake.requests
    assert str(sent.url) == MESSAGES_URL
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.headers["x-api-key"] == CLAUDE_PRIMARY
    assert orjson.loads(sent.content)["model"] == "opus"


# --- 4. failover and what it leaves -----------------------------------------------------------


@pytest.mark.parametrize("failure", [UNAVAILABLE, OVERLOADED], ids=["503", "529-overloaded"])
async def test_a_5xx_fails_over_to_the_next_connection(
    relay: Relay, pair: tuple[int, int], failure: Behaviour
) -> None:
    relay.fake.behaviours.update({CLAUDE_PRIMARY: failure, CLAUDE_BACKUP: answer(200, RAW_ANSWER)})

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert (reply.status, reply.body) == (200, RAW_ANSWER)
    assert reply.connection == pair[1]
    assert relay.fake.calls == [CLAUDE_PRIMARY, CLAUDE_PRIMARY, CLAUDE_BACKUP]
    assert [str(r.url) for r in relay.fake.requests] == [MESSAGES_URL] * 3


async def test_an_anthropic_overload_on_every_connection_is_relayed_in_its_shape(
    relay: Relay, pair: tuple[int, int]
) -> None:
    relay.fake.behaviours.update({CLAUDE_PRIMARY: OVERLOADED, CLAUDE_BACKUP: OVERLOADED})

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert reply.status == 529
    assert anthropic_shaped(reply) == {"type": "overloaded_error", "message": "Overloaded"}


async def test_a_429_hinting_past_the_wait_fails_over_and_locks_the_pair(
    relay: Relay, pair: tuple[int, int]
) -> None:
    limited = anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "30"})
    relay.fake.behaviours.update({CLAUDE_PRIMARY: limited, CLAUDE_BACKUP: answer(200, RAW_ANSWER)})

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert (reply.status, reply.connection) == (200, pair[1])
    assert relay.fake.calls == [CLAUDE_PRIMARY, CLAUDE_BACKUP]
    assert await relay.lock_remaining("claude", pair[0], "opus") == 30
    assert await relay.cooling_for(pair[0]) == 0
    relay.clock.advance(10)
    assert (await relay.post(messages_request())).connection == pair[1]
    assert relay.fake.calls == [CLAUDE_PRIMARY, CLAUDE_BACKUP, CLAUDE_BACKUP]


async def test_a_locked_only_target_is_a_503_in_anthropic_shape_with_retry_after(
    relay: Relay, first: int
) -> None:
    limited = anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "20"})
    relay.fake.behaviours[CLAUDE_PRIMARY] = limited
    refused = await relay.post(messages_request(), auth=x_api_key(relay.key))
    assert (refused.status, anthropic_shaped(refused)["type"]) == (429, "rate_limit_error")

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert (reply.status, reply.headers["retry-after"]) == (503, "20")
    error_object = anthropic_shaped(reply)
    assert (error_object["type"], error_object["code"]) == (
        "overloaded_error",
        "all_targets_cooling_down",
    )
    assert relay.fake.calls == [CLAUDE_PRIMARY]


async def test_consecutive_5xx_lock_the_pair_for_the_base(relay: Relay, first: int) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = UNAVAILABLE

    # a failure and its retry, then a third: availability.consecutiveFailures
    for _ in range(2):
        reply = await relay.post(messages_request())
        assert (reply.status, anthropic_shaped(reply)["type"]) == (503, "overloaded_error")

    assert await relay.lock_remaining("claude", first, "opus") == BASE_SECONDS
    assert await relay.cooling_for(first) == 0
    (view,) = await lockout_list(store=relay.store)
    assert (view.model, view.timer, view.reason) == ("opus", "self_set", "server_error")
