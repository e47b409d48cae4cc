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
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

import routing.streams as routing_streams
from resilience.domain.lockout import LockScope, model_slot
from resilience.services import resilience_settings_update
from resilience.services.lockouts import lockout_list, lockout_record
from resilience.store import MemoryStore
from routing.domain.endpoints import MESSAGES
from routing.domain.messages_stream import MESSAGE_STOP
from routing.models import Combo, Provider
from routing.services import api_key_create, combo_save
from tests.routing.format_support import (
    ACME_MODEL,
    CLAUDE_BACKUP,
    CLAUDE_PRIMARY,
    MESSAGES_FIRST_TOKEN,
    TEXT,
    Relay,
    add_anthropic_provider,
    anthropic_error,
    bearer,
    message_object,
    messages_events,
    messages_request,
    messages_text,
    named,
    relay_for,
    sse,
    x_api_key,
)
from tests.routing.harness import (
    UNAVAILABLE,
    Behaviour,
    FakeClock,
    add_connection,
    answer,
    error,
)
from tests.routing.stream_support import CUT, streaming

pytestmark = pytest.mark.django_db(transaction=True)

CAP_SECONDS = 30  # availability.transientCooldownCapMs
MESSAGES_URL = "http://claude.test/v1/messages"
DEFAULT_VERSION = "2023-06-01"
# An answer as the provider may format it (indented): relayed as is.
RAW_ANSWER = orjson.dumps(message_object(), option=orjson.OPT_INDENT_2)
OVERLOADED = anthropic_error(529, "overloaded_error", "Overloaded")


@pytest.fixture
def relay(
    fresh_snapshot: None, clock: FakeClock, store: MemoryStore, db: None, policy_clock: FakeClock
) -> Relay:
    """The Messages endpoint over a fake upstream (no behaviours yet), with a client key."""
    return relay_for(MESSAGES, clock, store)


@pytest.fixture
def claude(db: None) -> Provider:
    """An API-key provider speaking Anthropic's wire format, at ``http://claude.test/v1``."""
    return add_anthropic_provider()


@pytest.fixture
def first(claude: Provider) -> int:
    """``claude``'s first connection (priority 10), key ``CLAUDE_PRIMARY``."""
    return add_connection(claude, "primary", CLAUDE_PRIMARY, priority=10)


@pytest.fixture
def pair(claude: Provider, first: int) -> tuple[int, int]:
    """``claude``'s two connections, tried in this order."""
    return first, add_connection(claude, "backup", CLAUDE_BACKUP, priority=20)


def anthropic_shaped(reply: Any) -> dict[str, Any]:
    """The error object of a body in Anthropic's shape."""
    body = reply.json()
    assert body["type"] == "error"
    error_object = body["error"]
    assert isinstance(error_object, dict) and {"type", "message"} <= set(error_object)
    return error_object


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
}  # fmt: skip


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
    [(x_api_key("sk-not-a-key"), "invalid_api_key"), (bearer("sk-not-a-key"), "invalid_api_key"),
     ([], "missing_api_key")],
    ids=["bad-x-api-key", "bad-bearer", "no-key"],
)  # fmt: skip
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
        "not_found_error", "no_executable_targets"
    )  # fmt: skip
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
        "request_too_large", "request_too_large"
    )  # fmt: skip
    assert relay.fake.requests == []


async def test_a_get_is_a_405_in_anthropic_shape(relay: Relay, first: int) -> None:
    reply = await relay.post(b"", auth=x_api_key(relay.key), method="GET")

    assert (reply.status, reply.headers["allow"]) == (405, "POST")
    assert anthropic_shaped(reply)["code"] == "method_not_allowed"


async def test_an_anthropic_upstream_400_is_relayed_as_it_came(
    relay: Relay, pair: tuple[int, int]
) -> None:
    refused = orjson.dumps(
        {"type": "error",
         "error": {"type": "invalid_request_error",
                   "message": "messages.0.content: Input should be a valid list"}},
        option=orjson.OPT_INDENT_2,
    )  # fmt: skip
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
        "error": {"type": "invalid_request_error", "message": "temperature: out of range",
                  "code": "bad_param"},
    }  # fmt: skip


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


# --- 4. failover and what it leaves -----------------------------------------------------------


@pytest.mark.parametrize(
    "failure", [UNAVAILABLE, OVERLOADED], ids=["503", "529-overloaded"]
)  # fmt: skip
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
        "overloaded_error", "all_targets_cooling_down"
    )  # fmt: skip
    assert relay.fake.calls == [CLAUDE_PRIMARY]


async def test_consecutive_5xx_lock_the_pair_for_the_cap(relay: Relay, first: int) -> None:
    relay.fake.behaviours[CLAUDE_PRIMARY] = UNAVAILABLE

    # a failure and its retry, then a third: availability.consecutiveFailures
    for _ in range(2):
        reply = await relay.post(messages_request())
        assert (reply.status, anthropic_shaped(reply)["type"]) == (503, "overloaded_error")

    assert await relay.lock_remaining("claude", first, "opus") == CAP_SECONDS
    assert await relay.cooling_for(first) == 0
    (view,) = await lockout_list(store=relay.store)
    assert (view.model, view.timer, view.reason) == ("opus", "self_set", "server_error")


# --- 5. streams -------------------------------------------------------------------------------


def ends_with_interruption(reply: Any) -> dict[str, Any]:
    """The error object of the reply's last event, the gateway's in-band error in Anthropic's
    shape; nothing follows it (no ``message_stop``)."""
    name, last = sse(reply)[-1]
    assert name == "error" and last["type"] == "error"
    error_object = last["error"]
    assert (error_object["type"], error_object["code"]) == (
        "api_error", "upstream_stream_interrupted"
    )  # fmt: skip
    assert error_object["message"]
    assert b"message_stop" not in reply.body
    return dict(error_object)


async def test_a_stream_cut_after_its_first_token_is_finished_by_the_next_target(
    relay: Relay, pair: tuple[int, int]
) -> None:
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 2]  # two deltas
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(sent, then=CUT),
         CLAUDE_BACKUP: streaming(messages_events(ident="msg_02"))}
    )  # fmt: skip

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.status == 200
    assert reply.body.startswith(b"".join(sent))
    assert messages_text(reply) == "".join(TEXT)  # regenerated and spliced: nothing twice
    names = [name for name, _ in sse(reply)]
    assert names.count("message_start") == 1 and names[-1] == "message_stop"
    assert names.count("content_block_stop") == 1
    assert relay.fake.calls == [CLAUDE_PRIMARY, CLAUDE_BACKUP]
    broke = await lockout_record(store=relay.store, provider="claude", connection_id=pair[0])
    assert broke.failures[model_slot("opus", LockScope.EXACT)].consecutive == 1


async def test_with_continuation_off_a_cut_stream_ends_with_an_error_event(
    relay: Relay, pair: tuple[int, int]
) -> None:
    patch = {"streamRecovery": {"continueMidStream": False}}
    await database_sync_to_async(resilience_settings_update)(patch=patch)
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 2]
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(sent, then=CUT),
         CLAUDE_BACKUP: streaming(messages_events(ident="msg_02"))}
    )  # fmt: skip

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(b"".join(sent))
    assert len(sse(reply)) == len(sent) + 1
    ends_with_interruption(reply)
    assert messages_text(reply) == "".join(TEXT[:2])
    assert relay.fake.calls == [CLAUDE_PRIMARY]


async def test_an_in_band_error_after_the_first_token_ends_with_the_gateways_error_event(
    relay: Relay, first: int
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    sent = messages_events()[: MESSAGES_FIRST_TOKEN + 1]
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming([*sent, named("error", overloaded)])

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(b"".join(sent))
    ends_with_interruption(reply)
    assert reply.body.count(b"event: error") == 1


async def test_a_tool_use_block_commits_the_stream(relay: Relay, pair: tuple[int, int]) -> None:
    start, tool = messages_events()[0], named(
        "content_block_start",
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}},
    )  # fmt: skip
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming([start, tool], then=CUT),
         CLAUDE_BACKUP: streaming(messages_events(ident="msg_02"))}
    )  # fmt: skip

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(start + tool)  # the tool's name reached the client
    ends_with_interruption(reply)
    assert relay.fake.calls == [CLAUDE_PRIMARY]


OVERLOADED_EVENT = named(
    "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)
BEFORE_FIRST_TOKEN = {
    "cut": streaming(messages_events()[:MESSAGES_FIRST_TOKEN], then=CUT),
    "ended": streaming(messages_events()[:MESSAGES_FIRST_TOKEN]),
    "in-band-error": streaming([messages_events()[0], OVERLOADED_EVENT]),
}


@pytest.mark.parametrize("failure", BEFORE_FIRST_TOKEN.values(), ids=BEFORE_FIRST_TOKEN.keys())
async def test_a_stream_failing_before_its_first_token_fails_over_unseen(
    relay: Relay, pair: tuple[int, int], failure: Behaviour
) -> None:
    second = messages_events(ident="msg_02")
    relay.fake.behaviours.update({CLAUDE_PRIMARY: failure, CLAUDE_BACKUP: streaming(second)})

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert (reply.status, reply.connection) == (200, pair[1])
    assert reply.body == b"".join(second)  # nothing of the first stream, nothing twice
    assert relay.fake.calls[0] == CLAUDE_PRIMARY and relay.fake.calls[-1] == CLAUDE_BACKUP


@pytest.mark.parametrize("then", [None, CUT], ids=["ended", "reset"])
async def test_a_stream_ending_after_message_delta_gets_its_message_stop(
    relay: Relay, pair: tuple[int, int], then: BaseException | None
) -> None:
    sent = messages_events(stop=False)
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(sent, then=then), CLAUDE_BACKUP: UNAVAILABLE}
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body == b"".join(sent) + MESSAGE_STOP
    assert relay.fake.calls == [CLAUDE_PRIMARY]
    record = await lockout_record(store=relay.store, provider="claude", connection_id=pair[0])
    assert record.failures == {}


async def test_a_stream_ending_before_message_delta_ends_with_an_error_event(
    relay: Relay, first: int
) -> None:
    sent = messages_events()[:-2]  # up to content_block_stop: no stop reason yet
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming(sent)

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body.startswith(b"".join(sent))
    ends_with_interruption(reply)


async def test_a_stream_lingering_after_message_delta_is_ended_with_message_stop(
    relay: Relay, first: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routing_streams, "FINISH_GRACE_SECONDS", 0.01)
    sent = messages_events(stop=False)
    relay.fake.behaviours[CLAUDE_PRIMARY] = streaming(sent, hang=True)

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert reply.body == b"".join(sent) + MESSAGE_STOP


async def test_an_answer_without_content_is_relayed_not_failed_over(
    relay: Relay, pair: tuple[int, int]
) -> None:
    events = messages_events()
    empty = [events[0], events[-2], events[-1]]  # message_start, message_delta, message_stop
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(empty), CLAUDE_BACKUP: streaming(messages_events())}
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    assert (reply.connection, reply.body) == (pair[0], b"".join(empty))
    assert relay.fake.calls == [CLAUDE_PRIMARY]
