"""``POST /v1/responses`` through the relay consumer, in process: answers relayed as they came
from the provider's ``/responses``, errors in OpenAI's shape, failover and the pair's failure
record as for chat, streams that are never continued after commit, ``background`` served
synchronously, and ``previous_response_id`` sent to the connection that produced the answer.

``FormatUpstream`` plays the upstream and a ``MemoryStore`` on a fake clock holds the state
(tests/routing/format_support.py); ``acme`` speaks OpenAI's wire format, ``claude``
Anthropic's.
"""

from __future__ import annotations

import orjson
import pytest

from resilience.services.lockout_operations import lockout_list
from resilience.services.lockouts import lockout_record
from tests.routing.format_support import (
    ACME_MODEL,
    CLAUDE_MODEL,
    TEXT,
    Relay,
    bearer,
    json_answer,
    response_object,
    responses_events,
    responses_request,
    responses_text,
)
from tests.routing.harness import (
    BACKUP,
    PRIMARY,
    UNAVAILABLE,
    Behaviour,
    answer,
    error,
)
from tests.routing.stream_support import CUT, streaming

pytestmark = pytest.mark.django_db(transaction=True)

BASE_SECONDS = 2  # availability.transientCooldownBaseMs: the first self-set lock
WARNING = "x-omniroute-warning"
# An answer as a provider may format it (indented, keys in its own order): relayed as is.
RAW_ANSWER = orjson.dumps(response_object(), option=orjson.OPT_INDENT_2)


def answered(ident: str) -> Behaviour:
    """A non-stream answer with ``ident`` as its id."""
    return json_answer(response_object(ident))


# --- 1. success -------------------------------------------------------------------------------


async def test_a_plain_answer_is_relayed_byte_for_byte_from_the_responses_path(
    relay: Relay, primary: int
) -> None:
    relay.fake.behaviours[PRIMARY] = answer(200, RAW_ANSWER)
    body = responses_request(instructions="Be brief.", temperature=0.2)
    client_headers = [(b"x-api-key", b"sk-client-EXTRA"), (b"anthropic-version", b"2023-06-01")]

    reply = await relay.post(body, headers=client_headers)

    assert (reply.status, reply.body) == (200, RAW_ANSWER)
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["content-length"] == str(len(RAW_ANSWER))
    assert reply.headers["x-omniroute-request-id"]
    decision = reply.decision()
    assert (decision["strategy"], decision["provider"]) == ("single", "acme")
    assert reply.connection == primary
    (sent,) = relay.fake.requests
    assert (sent.method, str(sent.url)) == ("POST", "http://acme.test/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {PRIMARY}"
    assert orjson.loads(sent.content) == {**orjson.loads(body), "model": "m1"}
    assert not {"x-api-key", "anthropic-version"} & set(sent.headers.keys())
    assert relay.key.encode() not in repr(sent.headers.raw).encode()
    assert WARNING not in reply.headers


async def test_a_stream_is_relayed_byte_for_byte_and_ends_without_a_done(
    relay: Relay, primary: int
) -> None:
    events = responses_events()
    relay.fake.behaviours[PRIMARY] = streaming(events)

    reply = await relay.post(responses_request(stream=True))

    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.connection == primary
    assert reply.body == b"".join(events)  # nothing added: no [DONE] after response.completed
    assert reply.chunks[-1] == b""
    assert responses_text(reply) == "".join(TEXT)
    (sent,) = relay.fake.requests
    assert str(sent.url) == "http://acme.test/v1/responses"
    assert sent.headers["accept"] == "text/event-stream"
    assert orjson.loads(sent.content)["model"] == "m1"
    assert orjson.loads(sent.content)["stream"] is True


async def test_a_reset_after_response_completed_is_no_failure(
    relay: Relay, both: tuple[int, int]
) -> None:
    events = responses_events()
    relay.fake.behaviours.update({PRIMARY: streaming(events, then=CUT), BACKUP: UNAVAILABLE})

    reply = await relay.post(responses_request(stream=True))

    assert reply.body == b"".join(events)
    assert relay.fake.calls == [PRIMARY]
    record = await lockout_record(store=relay.store, provider="acme", connection_id=both[0])
    assert record.failures == {}


async def test_an_answer_without_output_text_is_relayed_not_failed_over(
    relay: Relay, both: tuple[int, int]
) -> None:
    events = responses_events()
    empty = [events[0], events[1], events[-1]]  # created, in progress, completed
    relay.fake.behaviours.update({PRIMARY: streaming(empty), BACKUP: streaming(events)})

    reply = await relay.post(responses_request(stream=True))

    assert (reply.connection, reply.body) == (both[0], b"".join(empty))
    assert relay.fake.calls == [PRIMARY]


async def test_a_done_after_response_completed_is_not_relayed(relay: Relay, primary: int) -> None:
    events = responses_events()
    relay.fake.behaviours[PRIMARY] = streaming([*events, b"data: [DONE]\n\n"])

    reply = await relay.post(responses_request(stream=True))

    assert reply.body == b"".join(events)


async def test_a_continuation_without_input_is_accepted_and_passed_on(
    relay: Relay, primary: int
) -> None:
    relay.fake.behaviours[PRIMARY] = answered("resp_2")

    reply = await relay.post(responses_request(input=None, previous_response_id="resp_1"))

    assert reply.status == 200
    (sent,) = relay.fake.bodies()
    assert sent["previous_response_id"] == "resp_1" and "input" not in sent


# --- 3. errors in OpenAI's shape --------------------------------------------------------------


def openai_error(reply_json: dict[str, object]) -> dict[str, object]:
    """The error object of an OpenAI-shaped body (nothing of Anthropic's shape in it)."""
    assert "type" not in reply_json
    error_object = reply_json["error"]
    assert isinstance(error_object, dict)
    assert {"message", "type", "code"} <= set(error_object)
    return error_object


INVALID = {
    "not-json": (b"{not json", "invalid_json"),
    "empty": (b"", "invalid_json"),
    "an-array": (b"[]", "invalid_json"),
    "no-model": (orjson.dumps({"input": "hi"}), "missing_model"),
    "no-input": (orjson.dumps({"model": ACME_MODEL}), "missing_input"),
    "input-a-number": (orjson.dumps({"model": ACME_MODEL, "input": 3}), "invalid_input"),
    "background-a-string": (responses_request(background="yes"), "invalid_background"),
    "previous-id-empty": (
        responses_request(previous_response_id=""),
        "invalid_previous_response_id",
    ),
}


@pytest.mark.parametrize(("body", "code"), INVALID.values(), ids=INVALID.keys())
async def test_an_invalid_request_is_a_400_in_openai_shape_and_asks_no_upstream(
    relay: Relay, primary: int, body: bytes, code: str
) -> None:
    reply = await relay.post(body)

    assert reply.status == 400
    error_object = openai_error(reply.json())
    assert (error_object["type"], error_object["code"]) == ("invalid_request_error", code)
    assert relay.fake.requests == []


@pytest.mark.parametrize(
    ("auth", "code"),
    [(bearer("sk-not-a-key"), "invalid_api_key"), ([], "missing_api_key")],
    ids=["bad-key", "no-key"],
)
async def test_a_bad_key_is_a_401_in_openai_shape(
    relay: Relay, primary: int, auth: list[tuple[bytes, bytes]], code: str
) -> None:
    reply = await relay.post(responses_request(), auth=auth)

    assert reply.status == 401
    error_object = openai_error(reply.json())
    assert (error_object["type"], error_object["code"]) == ("authentication_error", code)
    assert relay.fake.requests == []


async def test_an_unknown_model_is_a_404_in_openai_shape(relay: Relay, primary: int) -> None:
    reply = await relay.post(responses_request("nobody/m1"))

    assert reply.status == 404
    assert openai_error(reply.json())["code"] == "model_not_found"
    assert relay.fake.requests == []


async def test_a_model_of_an_anthropic_format_provider_is_a_404_no_executable_targets(
    relay: Relay, claude: int
) -> None:
    reply = await relay.post(responses_request(CLAUDE_MODEL))

    assert reply.status == 404
    body = reply.json()
    assert openai_error(body)["code"] == "no_executable_targets"
    diagnostics = body["diagnostics"]
    assert (diagnostics["wireFormat"], diagnostics["targetFormats"]) == ("openai", ["anthropic"])
    assert relay.fake.requests == []


async def test_an_upstream_400_is_relayed_as_it_came(relay: Relay, both: tuple[int, int]) -> None:
    refused = {
        "error": {
            "message": "Unsupported parameter: 'foo'.",
            "type": "invalid_request_error",
            "param": "foo",
            "code": "unknown_parameter",
        }
    }
    relay.fake.behaviours.update(
        {PRIMARY: answer(400, orjson.dumps(refused)), BACKUP: answered("resp_b")}
    )

    reply = await relay.post(responses_request(foo=1))

    assert (reply.status, reply.json()) == (400, refused)
    assert relay.fake.calls == [PRIMARY]  # a client mistake: no failover


# --- 4. failover and what it leaves -----------------------------------------------------------


async def test_a_503_fails_over_to_the_next_connection(relay: Relay, both: tuple[int, int]) -> None:
    relay.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: answer(200, RAW_ANSWER)})

    reply = await relay.post(responses_request())

    assert (reply.status, reply.body) == (200, RAW_ANSWER)
    assert reply.connection == both[1]
    assert reply.decision()["attempts"] == "3"
    assert relay.fake.calls == [PRIMARY, PRIMARY, BACKUP]  # a 5xx is retried once, then on
    assert [str(r.url) for r in relay.fake.requests] == ["http://acme.test/v1/responses"] * 3


async def test_a_429_hinting_past_the_wait_fails_over_and_locks_the_pair(
    relay: Relay, both: tuple[int, int]
) -> None:
    limited = error(429, "slow down", "rate_limit_exceeded", headers={"retry-after": "30"})
    relay.fake.behaviours.update({PRIMARY: limited, BACKUP: answered("resp_b")})

    reply = await relay.post(responses_request())

    assert (reply.status, reply.connection) == (200, both[1])
    assert relay.fake.calls == [PRIMARY, BACKUP]
    assert await relay.lock_remaining("acme", both[0], "m1") == 30
    assert await relay.cooling_for(both[0]) == 0  # the pair's, not the connection's
    relay.clock.advance(10)
    assert (await relay.post(responses_request())).connection == both[1]
    assert relay.fake.calls == [PRIMARY, BACKUP, BACKUP]


async def test_consecutive_503s_lock_the_pair_for_the_base(relay: Relay, primary: int) -> None:
    relay.fake.behaviours[PRIMARY] = UNAVAILABLE

    # a failure and its retry, then a third: availability.consecutiveFailures
    assert (await relay.post(responses_request())).status == 503
    assert (await relay.post(responses_request())).status == 503

    assert await relay.lock_remaining("acme", primary, "m1") == BASE_SECONDS
    assert await relay.cooling_for(primary) == 0
    (view,) = await lockout_list(store=relay.store)
    assert (view.model, view.timer, view.reason) == ("m1", "self_set", "server_error")
