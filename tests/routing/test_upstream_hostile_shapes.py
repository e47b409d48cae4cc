"""Upstream answers that parse but do not fit: a field of an unforeseen type where recovery
reads it, JSON nested deeper than the gateway can write again, a byte order mark, numbers of
thousands of digits. Each is a failed attempt the loop fails over on, or is relayed as it is,
and a stream always ends in the client API's shape: never a 500, never a stream left open."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async

from omniroute.core.store import MemoryStore
from resilience.models import ProviderErrorRule, StatusRestatementRule
from routing.domain.client.endpoints import MESSAGES, RESPONSES
from routing.domain.client.errors import anthropic_error_body, in_band_status
from routing.models import Provider
from routing.proxy import recovery
from tests.routing.format_support import (
    CLAUDE_BACKUP,
    CLAUDE_PRIMARY,
    RESPONSES_FIRST_TOKEN,
    Relay,
    add_anthropic_provider,
    messages_events,
    messages_request,
    named,
    relay_for,
    responses_events,
    responses_request,
    sse,
    x_api_key,
)
from tests.routing.fusion_support import KEYS, three_step_combo
from tests.routing.harness import (
    BACKUP,
    COMPLETION,
    OK,
    PRIMARY,
    UNAVAILABLE,
    FakeClock,
    Gateway,
    add_connection,
    answer,
    error,
)
from tests.routing.stream_support import (
    CUT,
    answer_chunks,
    ask,
    chunk,
    event,
    events_of,
    streaming,
    text_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = b"[" * 300 + b"]" * 300  # orjson reads it, and writes at most 254 levels
DONE = b"data: [DONE]\n\n"


def _ended(body: bytes) -> bool:
    """Whether the stream ended as a chat stream ends: its marker, or an in-band error after
    the first token (the reply was read to its last part: one left open times out)."""
    return body.endswith(DONE) or b'"error"' in body.rsplit(b"\n\n", 2)[-2]


async def messages_relay(clock: FakeClock, store: MemoryStore, *, backup: bool) -> Relay:
    """The Messages API before an Anthropic provider's primary connection (and its backup)."""
    relay = await database_sync_to_async(relay_for)(MESSAGES, clock, store)
    claude = await database_sync_to_async(add_anthropic_provider)()
    await database_sync_to_async(add_connection)(claude, "primary", CLAUDE_PRIMARY, priority=10)
    if backup:
        await database_sync_to_async(add_connection)(claude, "backup", CLAUDE_BACKUP, priority=20)
    return relay


# --- streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("odd", [5, True, 1.5])
async def test_a_continuation_whose_choices_are_no_list_still_ends_the_stream(
    gateway: Gateway, both: tuple[int, int], odd: object
) -> None:
    backup = [
        chunk({"role": "assistant", "content": ""}, ident="up-2"),
        event({"id": "up-2", "choices": odd}),
        *answer_chunks(ident="up-2")[1:],
    ]
    gateway.fake.behaviours.update(
        {PRIMARY: streaming(answer_chunks()[:3], then=CUT), BACKUP: streaming(backup)}
    )

    reply = await ask(gateway)  # read to its end: a stream left open times out here

    assert reply.status == 200 and _ended(reply.body)
    assert text_of(reply) == "The quick brown fox jumps."


async def test_a_deep_in_band_error_before_the_first_token_fails_over(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    deep = b'data: {"error": {"message": "x", "d": ' + DEEP + b"}}\n\n"
    gateway.fake.behaviours.update({PRIMARY: streaming([deep]), BACKUP: streaming(answer_chunks())})

    reply = await ask(gateway)

    assert reply.status == 200 and reply.connection == both[1]
    assert text_of(reply) == "The quick brown fox jumps."


@pytest.mark.parametrize("where", ["after the first token", "in a continuation"])
async def test_deep_events_after_commit_never_leave_the_stream_open(
    gateway: Gateway, both: tuple[int, int], where: str
) -> None:
    deep_error = b'data: {"error": {"message": "x", "d": ' + DEEP + b"}}\n\n"
    deep_text = (
        b'data: {"id":"up-2","x":' + DEEP + b',"choices":[{"index":0,'
        b'"delta":{"content":"The quick brown "},"finish_reason":null}]}\n\n'
    )
    if where == "after the first token":
        first = streaming([*answer_chunks(done=False)[:3], deep_error])
    else:
        first = streaming(answer_chunks()[:3], then=CUT)
    backup = [chunk({"role": "assistant", "content": ""}, ident="up-2"), deep_text]
    gateway.fake.behaviours.update(
        {PRIMARY: first, BACKUP: streaming([*backup, *answer_chunks(ident="up-2")[4:]])}
    )

    reply = await ask(gateway)

    assert reply.status == 200 and _ended(reply.body)


async def test_the_gateways_own_failure_after_commit_ends_the_stream_in_band(
    gateway: Gateway, primary: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: recovery.StreamRelay) -> None:
        raise RuntimeError("a defect of the relay")

    monkeypatch.setattr(recovery.StreamRelay, "run", broken)
    gateway.fake.behaviours[PRIMARY] = streaming(answer_chunks())

    reply = await ask(gateway)

    assert reply.status == 200 and _ended(reply.body)  # the head had gone out
    error = orjson.loads(events_of(reply)[-1].removeprefix(b"data: "))["error"]
    assert error["code"] == "internal_error"


# --- plain answers --------------------------------------------------------------------------


async def test_a_plain_answer_nested_too_deep_is_malformed_and_fails_over(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    deep = orjson.dumps(COMPLETION)[:-1] + b',"x":' + DEEP + b"}"
    gateway.fake.behaviours.update({PRIMARY: answer(200, deep), BACKUP: OK})

    reply = await gateway.call()

    assert (reply.status, reply.json(), reply.connection) == (200, COMPLETION, both[1])


async def test_a_plain_answer_after_a_byte_order_mark_is_an_answer(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = answer(200, b"\xef\xbb\xbf" + orjson.dumps(COMPLETION))

    reply = await gateway.call()

    assert (reply.status, reply.json()) == (200, COMPLETION)
    assert gateway.fake.calls == [PRIMARY]  # not a failure, not retried


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
@pytest.mark.parametrize("output", [5, True, {"a": 1}])
async def test_one_fusion_answer_whose_output_is_no_list_reaches_a_responses_client(
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    policy_clock: FakeClock,
    acme: Provider,
    output: Any,
    stream: bool,
) -> None:
    relay = await database_sync_to_async(relay_for)(RESPONSES, clock, store)
    await database_sync_to_async(three_step_combo)(acme, "fusion")
    answered = {"id": "resp_1", "output_text": "hi", "output": output}
    relay.fake.behaviours.update(
        {KEYS[0]: UNAVAILABLE, KEYS[1]: UNAVAILABLE, KEYS[2]: answer(200, orjson.dumps(answered))}
    )

    reply = await relay.post(responses_request("team", stream=stream))

    assert reply.status == 200


# --- error bodies and their numbers ---------------------------------------------------------


async def test_a_deep_error_body_reaches_an_anthropic_client_in_its_shape(
    fresh_snapshot: None, clock: FakeClock, store: MemoryStore, policy_clock: FakeClock
) -> None:
    relay = await messages_relay(clock, store, backup=False)
    deep = b'{"error": {"type": "invalid_request_error", "message": "bad"}, "d": ' + DEEP + b"}"
    relay.fake.behaviours[CLAUDE_PRIMARY] = answer(400, deep)

    reply = await relay.post(messages_request(), auth=x_api_key(relay.key))

    assert reply.status == 400
    assert reply.json()["type"] == "error"


def test_an_error_body_nested_too_deep_keeps_its_shape_without_its_extra_fields() -> None:
    deep = b'{"error": {"message": "bad", "code": "x"}, "d": ' + DEEP + b"}"

    shaped = orjson.loads(anthropic_error_body(400, deep))

    assert shaped == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "HTTP 400"},
    }


@pytest.mark.parametrize("digits", ["9" * 5000, "0" * 5000 + "1", "\u0663"])
async def test_a_countdown_of_thousands_of_digits_is_a_capped_lock_not_a_500(
    gateway: Gateway, both: tuple[int, int], digits: str
) -> None:
    await database_sync_to_async(ProviderErrorRule.objects.create)(
        provider="acme", rule_id="countdown", status=429, match="limit", parse_reset_countdown=True
    )
    said = f"monthly limit reached, resets in {digits} days"
    gateway.fake.behaviours.update({PRIMARY: error(429, said), BACKUP: OK})

    reply = await gateway.call()

    assert (reply.status, reply.connection) == (200, both[1])


@pytest.mark.parametrize("value", ["1" * 400, "\u00b2", "1" * 5000, "9" * 20 + ".5"])
async def test_a_restated_retry_after_that_is_no_usable_number_is_not_a_500(
    gateway: Gateway, both: tuple[int, int], value: str
) -> None:
    await database_sync_to_async(StatusRestatementRule.objects.create)(
        provider="acme",
        rule_id="restate",
        from_statuses=[403],
        to_status=429,
        text_markers=["quota"],
    )
    refusal = error(403, "quota gone", headers={"retry-after": value})
    gateway.fake.behaviours.update({PRIMARY: refusal, BACKUP: OK})

    reply = await gateway.call()

    assert (reply.status, reply.connection) == (200, both[1])


# --- how a stream ends ----------------------------------------------------------------------


async def test_an_error_after_a_chat_answer_finished_ends_it_and_fails_nothing(
    gateway: Gateway, both: tuple[int, int]
) -> None:
    late = event({"error": {"message": "late", "code": "x"}})
    gateway.fake.behaviours.update(
        {
            PRIMARY: streaming([*answer_chunks(done=False), late, DONE]),
            BACKUP: streaming(answer_chunks(ident="up-2")),
        }
    )

    reply = await ask(gateway)

    # It was charged to the primary and the answer asked of the backup again, its finish
    # relayed twice.
    assert reply.body.count(b'"finish_reason":"stop"') == 1 and reply.body.endswith(DONE)
    assert gateway.fake.calls == [PRIMARY]
    assert (await gateway.state(both[0])).is_clean


async def test_an_error_after_a_messages_answer_finished_ends_it_with_message_stop(
    fresh_snapshot: None, clock: FakeClock, store: MemoryStore, policy_clock: FakeClock
) -> None:
    relay = await messages_relay(clock, store, backup=True)
    late = named("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    relay.fake.behaviours.update(
        {
            CLAUDE_PRIMARY: streaming([*messages_events(stop=False), late]),
            CLAUDE_BACKUP: streaming(messages_events(ident="msg_2")),
        }
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    names = [name for name, _ in sse(reply)]
    assert names.count("message_delta") == 1 and names[-1] == "message_stop"
    assert relay.fake.calls == [CLAUDE_PRIMARY]


async def test_a_responses_stream_ended_by_done_before_it_completed_is_cut_not_answered(
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    policy_clock: FakeClock,
    acme: Provider,
) -> None:
    relay = await database_sync_to_async(relay_for)(RESPONSES, clock, store)
    await database_sync_to_async(add_connection)(acme, "primary", PRIMARY, priority=10)
    await database_sync_to_async(add_connection)(acme, "backup", BACKUP, priority=20)
    early = [*responses_events(completed=False)[: RESPONSES_FIRST_TOKEN + 2], DONE]
    relay.fake.behaviours.update(
        {PRIMARY: streaming(early), BACKUP: streaming(responses_events(ident="resp_2"))}
    )

    reply = await relay.post(responses_request(stream=True))

    # It was recorded as an answer: the client got half the text, a raw [DONE] and no
    # response.completed.
    events = sse(reply)
    assert events[-1][0] == "error"  # the gateway's: the answer was cut
    assert events[-1][1]["code"] == "upstream_stream_interrupted"
    assert DONE not in reply.body


async def test_an_in_band_refusal_of_the_prompt_before_the_first_token_is_the_clients_400(
    fresh_snapshot: None, clock: FakeClock, store: MemoryStore, policy_clock: FakeClock
) -> None:
    relay = await messages_relay(clock, store, backup=True)
    too_long = {"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens"}
    refusal = [*messages_events()[:2], named("error", {"type": "error", "error": too_long})]
    relay.fake.behaviours.update(
        {CLAUDE_PRIMARY: streaming(refusal), CLAUDE_BACKUP: streaming(refusal)}
    )

    reply = await relay.post(messages_request(stream=True), auth=x_api_key(relay.key))

    # It was a 502 after four attempts, each a failure of its connection
    assert reply.status == 400
    assert "prompt is too long" in reply.json()["error"]["message"]
    assert relay.fake.calls == [CLAUDE_PRIMARY, CLAUDE_BACKUP]  # a context length: no retry
    assert await relay.cooling_for(1) == 0 and await relay.cooling_for(2) == 0


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"type": "error", "error": {"type": "overloaded_error"}}', 529),
        (b'{"error": {"type": "invalid_request_error", "code": "context_length"}}', 400),
        (b'{"error": {"type": "rate_limit_error"}}', 429),
        (b'{"error": {"type": "server_error"}}', 502),  # says nothing more: an upstream failure
        (b'{"error": {"type": ["x"]}}', 502),
        (b'{"error": "text"}', 502),
        (b"not json", 502),
    ],
)
def test_an_in_band_errors_type_stands_for_a_status(body: bytes, status: int) -> None:
    assert in_band_status(body) == status
