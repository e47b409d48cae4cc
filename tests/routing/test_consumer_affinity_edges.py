"""Session affinity at its edges, through the consumers: combos (within a step only; the
strategies that own their order are left alone), eviction of a skipped pinned connection, a
client that leaves, and the session headers, which never reach the upstream."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from channels.db import database_sync_to_async

from omniroute.core.store import MemoryStore
from routing.domain.affinity.session_key import SESSION_HEADERS
from routing.domain.client.endpoints import MESSAGES, RESPONSES, Endpoint
from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.affinity_support import (
    ask,
    key_id,
    pinned_to,
    served,
    set_ttl,
    three_connections,
)
from tests.routing.combo_support import KEYS, combo_of
from tests.routing.format_support import (
    CLAUDE_PRIMARY,
    Relay,
    add_anthropic_provider,
    json_answer,
    message_object,
    messages_request,
    relay_for,
    response_object,
    responses_request,
)
from tests.routing.harness import (
    OK,
    UNAVAILABLE,
    FakeClock,
    Gateway,
    add_connection,
    chat,
    communicator,
    error,
    in_turn,
    read_reply,
    send_body,
)
from tests.routing.stream_support import answer_chunks, streaming

pytestmark = pytest.mark.django_db(transaction=True)

HINTED_429 = error(429, "slow down", "rate_limit_exceeded", {"retry-after": "60"})
EVERY_SESSION_HEADER = [(name, b"session-1") for name in SESSION_HEADERS]
SECRETS = {RESPONSES.name: KEYS[0], MESSAGES.name: CLAUDE_PRIMARY}
ANSWERS = {RESPONSES.name: response_object(), MESSAGES.name: message_object()}


@pytest.fixture
def all_ok(gateway: Gateway) -> None:
    set_ttl()
    gateway.fake.behaviours.update(dict.fromkeys(KEYS, OK))


# --- combos ----------------------------------------------------------------------------------


def one_step_combo(acme: Provider, strategy: str = "priority") -> list[int]:
    """Combo ``team``: one step ``acme/m1`` over a, b, c (not pinned to a connection)."""
    ids = three_connections(acme)
    fields = {"name": "team", "strategy": strategy}
    combo_save(combo=Combo(), fields=fields, targets=[{"provider": acme, "model": "m1"}])
    return ids


async def test_within_a_combo_step_the_session_keeps_its_connection(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, b, _ = await database_sync_to_async(one_step_combo)(acme)
    assert await served(gateway, "s0") == [a]

    replies = [await ask(gateway, "s1", model="team") for _ in range(3)]

    assert [reply.connection for reply in replies] == [b, b, b]


async def test_a_priority_combo_keeps_its_declared_order(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, b, _ = await database_sync_to_async(combo_of)(acme, "priority")  # one step per account
    assert await served(gateway, "s0") == [a]
    assert await served(gateway, "s1") == [b]  # acme/m1: the session is on b

    reply = await ask(gateway, "s1", model="team")

    assert reply.connection == a  # the combo's first step, as declared
    assert await pinned_to(gateway.store, await key_id(), "s1") == a  # a answered it last


async def test_a_strategy_that_owns_its_order_is_left_alone(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    ids = await database_sync_to_async(one_step_combo)(acme, "round-robin")

    replies = [await ask(gateway, "s1", model="team") for _ in range(3)]

    assert [reply.connection for reply in replies] == ids  # the rotation, undisturbed
    assert not await gateway.store.scan("affinity")


# --- eviction, and a client that leaves --------------------------------------------------------


async def test_a_skipped_pinned_connection_loses_its_pin_when_nothing_else_answers(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, b, _ = await database_sync_to_async(three_connections)(acme)
    assert await served(gateway, "s1") == [a]
    gateway.fake.behaviours[KEYS[0]] = HINTED_429
    assert (await ask(gateway, None, content="")).connection == b  # a cools for 60 s
    gateway.fake.behaviours.update({KEYS[1]: UNAVAILABLE, KEYS[2]: UNAVAILABLE})
    asked = len(gateway.fake.calls)

    assert (await ask(gateway, "s1")).status >= 500

    assert KEYS[0] not in gateway.fake.calls[asked:]  # skipped, not asked
    assert await pinned_to(gateway.store, await key_id(), "s1") is None


async def test_a_client_that_leaves_never_evicts(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, _, _ = await database_sync_to_async(three_connections)(acme)
    assert await served(gateway, "s1") == [a]
    arrived = asyncio.Event()

    async def hanging(request: httpx.Request) -> httpx.Response:
        arrived.set()
        await asyncio.Event().wait()  # never answers: the client leaves first
        raise AssertionError("unreachable")

    gateway.fake.behaviours[KEYS[0]] = hanging
    comm = communicator(gateway.app, gateway.key, extra_headers=[(b"x-session-id", b"s1")])
    await send_body(comm, chat())
    await asyncio.wait_for(arrived.wait(), 5)
    await comm.send_input({"type": "http.disconnect"})
    await comm.wait(5)

    assert await pinned_to(gateway.store, await key_id(), "s1") == a
    gateway.fake.behaviours[KEYS[0]] = in_turn(OK)
    assert await served(gateway, "s1") == [a]


async def test_a_streamed_answer_pins_the_session_too(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    a, b, _ = await database_sync_to_async(three_connections)(acme)
    assert await served(gateway, "s0") == [a]
    gateway.fake.behaviours[KEYS[1]] = streaming(answer_chunks())

    for _ in range(2):
        comm = communicator(gateway.app, gateway.key, extra_headers=[(b"x-session-id", b"s1")])
        await send_body(comm, chat(stream=True))
        reply = await read_reply(comm)
        assert (reply.status, reply.connection) == (200, b)

    assert await pinned_to(gateway.store, await key_id(), "s1") == b


# --- headers ----------------------------------------------------------------------


async def test_the_session_headers_never_reach_the_upstream_from_chat(
    gateway: Gateway, acme: Provider, all_ok: None
) -> None:
    await database_sync_to_async(three_connections)(acme)
    comm = communicator(gateway.app, gateway.key, extra_headers=EVERY_SESSION_HEADER)
    await send_body(comm, chat())
    await comm.receive_output(5)

    sent = gateway.fake.requests[-1]
    assert not [name for name in sent.headers if name.encode() in SESSION_HEADERS]
    assert b"session-1" not in b"".join(f"{k}: {v}".encode() for k, v in sent.headers.items())


@pytest.mark.parametrize("endpoint", [RESPONSES, MESSAGES], ids=lambda e: e.name)
async def test_the_session_headers_never_reach_the_upstream_from_the_other_apis(
    endpoint: Endpoint,
    fresh_snapshot: None,
    clock: FakeClock,
    store: MemoryStore,
    acme: Provider,
    policy_clock: FakeClock,
) -> None:
    def setup() -> Relay:
        set_ttl()
        provider = add_anthropic_provider() if endpoint is MESSAGES else acme
        add_connection(provider, "primary", SECRETS[endpoint.name])
        return relay_for(endpoint, clock, store)

    relay = await database_sync_to_async(setup)()
    relay.fake.behaviours[SECRETS[endpoint.name]] = json_answer(ANSWERS[endpoint.name])
    body = messages_request() if endpoint is MESSAGES else responses_request()
    passed = [(b"anthropic-version", b"2023-06-01"), (b"anthropic-beta", b"tools-1")]

    reply = await relay.post(body, headers=[*EVERY_SESSION_HEADER, *passed])

    assert reply.status == 200, reply.body
    sent = relay.fake.requests[-1].headers
    assert not [name for name in sent if name.encode() in SESSION_HEADERS]
    assert (sent.get("anthropic-beta") == "tools-1") is (endpoint is MESSAGES)


@pytest.mark.parametrize("header", [*SESSION_HEADERS, b"authorization", b"x-api-key"])
def test_no_endpoint_may_pass_a_session_header_or_a_credential(header: bytes) -> None:
    with pytest.raises(ValueError, match="may not pass"):
        Endpoint(
            "custom",
            "/v1/custom",
            "openai",
            "/custom",
            MESSAGES.parse,
            MESSAGES.stream_state,
            passed_headers=(b"anthropic-version", header),
        )
