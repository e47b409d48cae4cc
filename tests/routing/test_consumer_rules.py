"""Status restatement, provider error rules and the request-rejected streak, end to end.

The chat consumer runs over an ``httpx.MockTransport`` upstream and a ``MemoryStore`` on a fake
clock (reference-part1 §4.6, §6, §7): agentrouter's seeded rules, an operator rule added in the
admin taking effect on the next request, and refusals escalating 5 min, 15 min, banned.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async
from channels.testing import ApplicationCommunicator
from django.apps import apps
from django.test import Client
from django.urls import reverse

from resilience import state as resilience_state
from resilience.domain.connection_state import ConnectionState
from resilience.persistence import persistence_flush
from resilience.rules_models import ProviderErrorRule
from resilience.services.connections import connection_state_get
from resilience.services.lockouts import lockout_record
from resilience.store import MemoryStore
from routing.consumers import ChatCompletionsConsumer
from routing.models import Provider, ProviderConnection
from routing.services import api_key_create, connection_clear_error, connection_save, provider_save
from routing.snapshot import snapshot_clear
from routing.upstream import Upstream
from tests.routing.conftest import seeded_provider

pytestmark = pytest.mark.django_db(transaction=True)

RULES_SEED = importlib.import_module("resilience.migrations.0003_rules")
PRIMARY = "sk-PRIMARY-0001"
BACKUP = "sk-BACKUP-0002"
AGENT_MODEL, OTHER_MODEL = "claude-sonnet-4", "gpt-5"
QUOTA_TEXT = "用户额度不足, 剩余额度: $0.00"  # "user quota insufficient"
ACCESS_TEXT = f"无权访问模型 {AGENT_MODEL}"  # "no permission to access the model"
LOCKOUT_MAX_SECONDS = 1800  # the agentrouter rule's 6 h, clamped to the lockout maximum
RECEIVE_TIMEOUT_SECONDS = 5
COMPLETION = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0}]}

Behaviour = Callable[[httpx.Request], Awaitable[httpx.Response]]


# --- fake upstream, clock and client (the harness of test_consumer_breaker) -----------------


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body


def error(status: int, message: str) -> Behaviour:
    """Answer ``status`` with an OpenAI-style error body, as real transports return them."""
    body = orjson.dumps({"error": {"message": message, "type": "upstream_error"}})

    async def behaviour(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        return httpx.Response(status, headers=headers, content=_once(body))

    return behaviour


async def OK(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=COMPLETION)


REFUSAL = error(403, "Request not allowed")


@dataclass
class FakeUpstream:
    """Answers by the connection secret a request carries; records (secret, model) pairs."""

    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        secret = request.headers["authorization"].removeprefix("Bearer ")
        self.calls.append((secret, orjson.loads(await request.aread())["model"]))
        return await self.behaviours[secret](request)

    def secrets(self) -> list[str]:
        return [secret for secret, _ in self.calls]


@dataclass
class FakeClock:
    """The store's clock (epoch seconds); moves only when told."""

    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Gateway:
    """The chat consumer over the fake upstream and a store on the fake clock, with a key."""

    key: str
    fake: FakeUpstream
    clock: FakeClock
    store: MemoryStore
    app: Any = None

    def __post_init__(self) -> None:
        upstream = Upstream(httpx.MockTransport(self.fake))
        self.app = ChatCompletionsConsumer.as_asgi(upstream=upstream, store=self.store)

    async def call(self, model: str) -> Reply:
        path = "/v1/chat/completions"
        scope = {
            "type": "http", "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"",
            "headers": [(b"authorization", f"Bearer {self.key}".encode())],
            "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
        }  # fmt: skip
        comm = ApplicationCommunicator(self.app, scope)
        body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
        await comm.send_input({"type": "http.request", "body": body, "more_body": False})
        start = await comm.receive_output(RECEIVE_TIMEOUT_SECONDS)
        content = b""
        while True:
            event = await comm.receive_output(RECEIVE_TIMEOUT_SECONDS)
            content += event["body"]
            if not event.get("more_body"):
                break
        await comm.wait(RECEIVE_TIMEOUT_SECONDS)
        headers = {name.decode(): value.decode() for name, value in start["headers"]}
        return Reply(start["status"], headers, content)

    async def state(self, connection_id: int) -> ConnectionState:
        return await connection_state_get(
            store=self.store, connection_id=connection_id, durable=ConnectionState()
        )

    async def cooling_for(self, connection_id: int) -> float:
        return (await self.state(connection_id)).remaining(self.clock.now)


def gathering(count: int, then: Behaviour) -> Behaviour:
    """Hold each request until ``count`` have arrived, then answer them all with ``then``."""
    arrived, everyone = [0], asyncio.Event()

    async def behaviour(request: httpx.Request) -> httpx.Response:
        arrived[0] += 1
        if arrived[0] >= count:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), RECEIVE_TIMEOUT_SECONDS)
        return await then(request)

    return behaviour


# --- data -----------------------------------------------------------------------------------


def add_connection(provider: Provider, name: str, secret: str, priority: int) -> int:
    fields = {"provider": provider, "name": name, "priority": priority}
    return connection_save(connection=ProviderConnection(), fields=fields, secret=secret).pk


@pytest.fixture
def agentrouter(db: None) -> Provider:
    """The seeded agentrouter provider, with the flags ``0002_seed_providers`` gives it."""
    # conftest's seeded_provider re-creates a flushed provider without its flags
    flags = {"full_text_rules": True, "honors_rule_scope": True}
    return provider_save(provider=seeded_provider("agentrouter"), fields=flags)


@pytest.fixture
def seeded_rules(db: None) -> None:
    """The built-in rules of ``0003_rules`` (re-seeded if a transactional test flushed them)."""
    if not ProviderErrorRule.objects.filter(is_builtin=True).exists():
        RULES_SEED.seed(apps, None)


@pytest.fixture
def acme(db: None) -> Provider:
    fields = {"slug": "acme", "name": "Acme", "category": "api_key"}
    return provider_save(provider=Provider(), fields={**fields, "base_url": "http://acme.test/v1"})


@pytest.fixture
async def gateway(db: None) -> AsyncIterator[Gateway]:
    snapshot_clear()
    _, key = await database_sync_to_async(api_key_create)(name="client")
    clock = FakeClock()
    yield Gateway(key, FakeUpstream(), clock, MemoryStore(clock=clock))
    await persistence_flush()  # let the write-through finish before the database is flushed


@pytest.fixture
def process_store(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make the test's store the process store, so operator services act on it too."""
    resilience_state.get_store.cache_clear()
    monkeypatch.setattr(resilience_state, "build_store", lambda *args, **kwargs: gateway.store)
    yield
    resilience_state.get_store.cache_clear()


# --- 7. agentrouter: restatement and the seeded rules ---------------------------------------


async def test_a_misstated_quota_403_reaches_the_client_as_429_with_retry_after_60(
    gateway: Gateway, agentrouter: Provider, seeded_rules: None
) -> None:
    await database_sync_to_async(add_connection)(agentrouter, "only", PRIMARY, 10)
    gateway.fake.behaviours[PRIMARY] = error(403, QUOTA_TEXT)

    reply = await gateway.call(f"agentrouter/{AGENT_MODEL}")

    assert (reply.status, reply.headers["retry-after"]) == (429, "60")
    assert QUOTA_TEXT in orjson.loads(reply.body)["error"]["message"]


async def test_a_misstated_quota_403_fails_over_and_cools_only_that_connection(
    gateway: Gateway, agentrouter: Provider, seeded_rules: None
) -> None:
    first = await database_sync_to_async(add_connection)(agentrouter, "first", PRIMARY, 10)
    second = await database_sync_to_async(add_connection)(agentrouter, "second", BACKUP, 20)
    gateway.fake.behaviours.update({PRIMARY: error(403, QUOTA_TEXT), BACKUP: OK})

    reply = await gateway.call(f"agentrouter/{AGENT_MODEL}")

    assert reply.status == 200
    assert gateway.fake.secrets() == [PRIMARY, BACKUP]
    cooled = await gateway.state(first)
    assert (cooled.test_status, cooled.error_code) == ("unavailable", "429")  # never terminal
    assert 0 < cooled.remaining(gateway.clock.now) <= 60
    assert (await gateway.state(second)).is_clean


async def test_a_model_access_403_is_not_restated_and_locks_only_that_model(
    gateway: Gateway, agentrouter: Provider, seeded_rules: None
) -> None:
    # given: the only connection refuses one model
    only = await database_sync_to_async(add_connection)(agentrouter, "only", PRIMARY, 10)
    gateway.fake.behaviours[PRIMARY] = error(403, ACCESS_TEXT)
    # when
    reply = await gateway.call(f"agentrouter/{AGENT_MODEL}")
    # then: the client sees the 403; the model is locked there, the connection is not cooled
    assert reply.status == 403 and "retry-after" not in reply.headers
    record = await lockout_record(store=gateway.store, provider="agentrouter", connection_id=only)
    lock = record.lock_for(AGENT_MODEL, gateway.clock.now)
    assert lock is not None and lock.reason == "forbidden"
    assert lock.remaining(gateway.clock.now) == LOCKOUT_MAX_SECONDS
    state = await gateway.state(only)
    assert (state.test_status, state.rate_limited_until) == ("active", None)
    # and: another model still reaches the connection, the locked one does not
    gateway.fake.behaviours[PRIMARY] = OK
    assert (await gateway.call(f"agentrouter/{OTHER_MODEL}")).status == 200
    assert (await gateway.call(f"agentrouter/{AGENT_MODEL}")).status == 503
    assert gateway.fake.calls == [(PRIMARY, AGENT_MODEL), (PRIMARY, OTHER_MODEL)]


# --- 8. an operator rule from the admin, without a restart ----------------------------------


def post_error_rule(client: Client, **fields: str) -> Any:
    form = {
        "position": "0", "is_enabled": "on", "header_name": "", "header_match": "equals",
        "header_value": "", **fields,
    }  # fmt: skip
    return client.post(reverse("admin:resilience_providererrorrule_add"), form)


async def test_an_operator_rule_added_in_the_admin_applies_to_the_next_request(
    gateway: Gateway, acme: Provider, staff_client: Client
) -> None:
    primary = await database_sync_to_async(add_connection)(acme, "primary", PRIMARY, 10)
    await database_sync_to_async(add_connection)(acme, "backup", BACKUP, 20)
    gateway.fake.behaviours.update({PRIMARY: error(429, "org cap reached"), BACKUP: OK})
    # given: without a rule, the 429 cools the connection by the default backoff (3 s)
    assert (await gateway.call("acme/m1")).status == 200
    assert await gateway.cooling_for(primary) == 3
    gateway.clock.advance(3)
    # when: an operator adds a rule in the admin
    response = await database_sync_to_async(post_error_rule)(
        staff_client, provider="acme", rule_id="acme-org-cap", status="429", match="org cap",
        scope="connection", reason="quota_exhausted", cooldown_ms="90000",
    )  # fmt: skip
    assert response.status_code == 302
    assert response.url == reverse("admin:resilience_providererrorrule_changelist")
    # then: the very next 429 cools it for the rule's 90 s
    assert (await gateway.call("acme/m1")).status == 200
    assert await gateway.cooling_for(primary) == 90
    state = await gateway.state(primary)
    assert (state.test_status, state.last_error_type) == ("unavailable", "quota_exhausted")


# --- 9. the request-rejected streak ---------------------------------------------------------


@pytest.fixture
def pair(gateway: Gateway, acme: Provider) -> tuple[int, int]:
    """acme's primary (refusing) and backup (serving) connections."""
    primary = add_connection(acme, "primary", PRIMARY, 10)
    backup = add_connection(acme, "backup", BACKUP, 20)
    gateway.fake.behaviours.update({PRIMARY: REFUSAL, BACKUP: OK})
    return primary, backup


async def refuse(gateway: Gateway, primary: int) -> ConnectionState:
    """One request the primary refuses (a 403: the client sees it); the primary's state."""
    calls = len(gateway.fake.calls)
    assert (await gateway.call("acme/m1")).status == 403
    assert gateway.fake.secrets()[calls:] == [PRIMARY]
    return await gateway.state(primary)


async def test_refusals_cool_5_then_15_minutes_and_the_third_bans(
    gateway: Gateway, pair: tuple[int, int]
) -> None:
    primary, _ = pair

    assert (await refuse(gateway, primary)).remaining(gateway.clock.now) == 300
    gateway.clock.advance(299)
    assert (await gateway.call("acme/m1")).status == 200  # the backup, the primary untouched
    gateway.clock.advance(1)
    assert (await refuse(gateway, primary)).remaining(gateway.clock.now) == 900
    gateway.clock.advance(900)
    banned = await refuse(gateway, primary)

    assert (banned.test_status, banned.rate_limited_until) == ("banned", None)
    gateway.clock.advance(24 * 3600)
    assert (await gateway.call("acme/m1")).status == 200
    assert gateway.fake.secrets() == [PRIMARY, BACKUP, PRIMARY, PRIMARY, BACKUP]


async def test_a_refusal_arriving_during_the_cooldown_is_not_counted(
    gateway: Gateway, pair: tuple[int, int]
) -> None:
    primary, _ = pair
    gateway.fake.behaviours[PRIMARY] = gathering(2, REFUSAL)
    # given: two refusals in flight together; the second lands inside the first's cooldown
    replies = await asyncio.gather(gateway.call("acme/m1"), gateway.call("acme/m1"))
    assert [reply.status for reply in replies] == [403, 403]
    assert await gateway.cooling_for(primary) == 300
    gateway.fake.behaviours[PRIMARY] = REFUSAL
    # when: two more refusals, each after the cooldown
    gateway.clock.advance(300)
    second = await refuse(gateway, primary)
    gateway.clock.advance(900)
    third = await refuse(gateway, primary)
    # then: they were the 2nd and 3rd of the streak, not the 3rd and 4th
    assert (second.test_status, second.remaining(gateway.clock.now - 900)) == ("unavailable", 900)
    assert third.test_status == "banned"


async def test_a_success_between_refusals_clears_the_streak(
    gateway: Gateway, pair: tuple[int, int]
) -> None:
    primary, _ = pair
    await refuse(gateway, primary)
    gateway.clock.advance(300)
    gateway.fake.behaviours[PRIMARY] = OK
    assert (await gateway.call("acme/m1")).status == 200
    assert (await gateway.state(primary)).is_clean
    gateway.fake.behaviours[PRIMARY] = REFUSAL

    again = await refuse(gateway, primary)

    assert again.remaining(gateway.clock.now) == 300  # a first refusal again, not a second


# Spec §4.6: an operator reset clears the streak, so the next refusal is a first one again.
async def test_the_operator_reset_clears_the_streak(
    gateway: Gateway, pair: tuple[int, int], process_store: None
) -> None:
    primary, _ = pair
    await refuse(gateway, primary)
    row = await ProviderConnection.objects.aget(pk=primary)
    await database_sync_to_async(connection_clear_error)(connection=row)

    again = await refuse(gateway, primary)

    assert again.remaining(gateway.clock.now) == 300
