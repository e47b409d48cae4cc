"""Every request header the /v1 consumers read, holding bytes no client should send (not ASCII,
not UTF-8, control characters), beside a valid key: the client gets an answer or a 4xx in its
API's own error shape, never a 500 (docs/getting-started.md, "What clients can rely on").

A passed ``anthropic-beta`` of Latin-1 text was a 500 until it was refused as the client's
``invalid_header``; this sweeps the rest of the headers the same way."""

from __future__ import annotations

import orjson
import pytest

from omniroute.core.store import MemoryStore
from routing.domain.client.endpoints import CHAT_COMPLETIONS, MESSAGES, RESPONSES, Endpoint
from tests.routing.format_support import (
    CLAUDE_PRIMARY,
    Relay,
    add_anthropic_provider,
    message_object,
    messages_request,
    relay_for,
    response_object,
    responses_request,
)
from tests.routing.harness import COMPLETION, PRIMARY, FakeClock, add_connection, answer, chat

pytestmark = pytest.mark.django_db(transaction=True)

# The request headers the gateway reads: the key, session affinity, leases, the deadline, the
# request's mode and budget, the fallback hint, the passed Anthropic headers, trace context, and
# the ones every HTTP request has.
READ = (
    b"authorization",
    b"x-api-key",
    b"x-session-id",
    b"x-codex-session-id",
    b"x-omniroute-session",
    b"x-omniroute-lease-owner",
    b"x-omniroute-lease-generation",
    b"x-omniroute-deadline-ms",
    b"x-omniroute-mode",
    b"x-omniroute-budget",
    b"x-omniroute-budget-fallback",
    b"x-omni-fallback-hint",
    b"anthropic-version",
    b"anthropic-beta",
    b"traceparent",
    b"tracestate",
    b"content-type",
    b"accept",
)
HOSTILE = {
    "latin-1": b"caf\xe9",
    "not-utf-8": b"\xff\xfe\xfd",
    "control": b"a\x00b\x7fc",
}
ENDPOINTS = {"chat": CHAT_COMPLETIONS, "responses": RESPONSES, "messages": MESSAGES}


@pytest.fixture(params=list(ENDPOINTS))
def relay(
    request: pytest.FixtureRequest,
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    db: None,
    policy_clock: FakeClock,
    primary: int,  # acme's connection: chat and responses
) -> Relay:
    """An endpoint over a fake upstream that answers every request, with a client key."""
    endpoint: Endpoint = ENDPOINTS[request.param]
    relay = relay_for(endpoint, clock, store)
    add_connection(add_anthropic_provider(), "primary", CLAUDE_PRIMARY, priority=10)
    answers = {
        CHAT_COMPLETIONS.name: COMPLETION,
        RESPONSES.name: response_object(),
        MESSAGES.name: message_object(),
    }
    ok = answer(200, orjson.dumps(answers[endpoint.name]))
    relay.fake.behaviours.update({PRIMARY: ok, CLAUDE_PRIMARY: ok})
    return relay


def body_of(endpoint: Endpoint) -> bytes:
    if endpoint is MESSAGES:
        return messages_request()
    return responses_request() if endpoint is RESPONSES else chat()


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
@pytest.mark.parametrize("name", READ, ids=[n.decode() for n in READ])
async def test_a_hostile_header_gets_an_answer_or_the_clients_4xx(
    relay: Relay, name: bytes, value: bytes
) -> None:
    reply = await relay.post(body_of(relay.endpoint), headers=[(name, value)])

    assert reply.status != 500, reply.body
    assert reply.status == 200 or 400 <= reply.status < 500, reply.body
    shaped = reply.json()
    if name in MESSAGES.passed_headers and relay.endpoint is MESSAGES:  # nothing odd goes on
        assert reply.status == 400 and shaped["error"]["code"] == "invalid_header"
    if reply.status != 200:
        error = shaped["error"]  # OpenAI's shape, or Anthropic's on /v1/messages
        assert (shaped.get("type") == "error") is (relay.endpoint is MESSAGES)
        assert error["code"] and error["message"]
