"""Status restatement, provider error rules and the request-rejected streak, end to end.

The chat consumer runs over an ``httpx.MockTransport`` upstream and a ``MemoryStore`` on a fake
clock: agentrouter's seeded rules, an operator rule added in the
admin taking effect on the next request, and refusals escalating 5 min, 15 min, banned.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.apps import apps
from django.test import Client
from django.urls import reverse

from resilience.domain.connection_state import ConnectionState
from resilience.models.rules import ProviderErrorRule
from resilience.services.lockouts import lockout_record
from routing.models import Provider, ProviderConnection
from routing.services import connection_clear_error, provider_save
from tests.routing.conftest import seeded_provider
from tests.routing.harness import OK, Gateway, add_connection, error, gathering

pytestmark = pytest.mark.django_db(transaction=True)

RULES_SEED = importlib.import_module("resilience.migrations.0003_rules")
PRIMARY = "sk-PRIMARY-0001"
BACKUP = "sk-BACKUP-0002"
AGENT_MODEL, OTHER_MODEL = "claude-sonnet-4", "gpt-5"
QUOTA_TEXT = "用户额度不足, 剩余额度: $0.00"  # "user quota insufficient"
ACCESS_TEXT = f"无权访问模型 {AGENT_MODEL}"  # "no permission to access the model"
LOCKOUT_MAX_SECONDS = 1800  # the agentrouter rule's 6 h, clamped to the lockout maximum
REFUSAL = error(403, "Request not allowed")


# --- data (``gateway``, ``acme`` and ``process_store`` come from conftest) ------------------


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


# --- 7. agentrouter: restatement and the seeded rules ---------------------------------------


async def test_a_misstated_quota_403_reaches_the_client_as_429_with_retry_after_60(
    gateway: Gateway, agentrouter: Provider, seeded_rules: None
) -> None:
    await database_sync_to_async(add_connection)(agentrouter, "only", PRIMARY, priority=10)
    gateway.fake.behaviours[PRIMARY] = error(403, QUOTA_TEXT)

    reply = await gateway.call(f"agentrouter/{AGENT_MODEL}")

    assert (reply.status, reply.headers["retry-after"]) == (429, "60")
    assert QUOTA_TEXT in reply.json()["error"]["message"]


async def test_a_misstated_quota_403_fails_over_and_cools_only_that_connection(
    gateway: Gateway, agentrouter: Provider, seeded_rules: None
) -> None:
    first = await database_sync_to_async(add_connection)(agentrouter, "first", PRIMARY, priority=10)
    second = await database_sync_to_async(add_connection)(
        agentrouter, "second", BACKUP, priority=20
    )
    gateway.fake.behaviours.update({PRIMARY: error(403, QUOTA_TEXT), BACKUP: OK})

    reply = await gateway.call(f"agentrouter/{AGENT_MODEL}")

    assert reply.status == 200
    assert gateway.fake.calls == [PRIMARY, BACKUP]
    cooled = await gateway.state(first)
    assert (cooled.test_status, cooled.error_code) == ("unavailable", "429")  # never terminal
    assert 0 < cooled.remaining(gateway.clock.now) <= 60
    assert (await gateway.state(second)).is_clean


async def test_a_model_access_403_is_not_restated_and_locks_only_that_model(
    gateway: Gateway, agentrouter: Provider, seeded_rules: None
) -> None:
    # given: the only connection refuses one model
    only = await database_sync_to_async(add_connection)(agentrouter, "only", PRIMARY, priority=10)
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
    assert gateway.fake.sent == [(PRIMARY, AGENT_MODEL), (PRIMARY, OTHER_MODEL)]


# --- 8. an operator rule from the admin, without a restart ----------------------------------


def post_error_rule(client: Client, **fields: str) -> Any:
    form = {
        "position": "0",
        "is_enabled": "on",
        "header_name": "",
        "header_match": "equals",
        "header_value": "",
        **fields,
    }
    return client.post(reverse("admin:resilience_providererrorrule_add"), form)


async def test_an_operator_rule_added_in_the_admin_applies_to_the_next_request(
    gateway: Gateway, acme: Provider, staff_client: Client
) -> None:
    primary = await database_sync_to_async(add_connection)(acme, "primary", PRIMARY, priority=10)
    await database_sync_to_async(add_connection)(acme, "backup", BACKUP, priority=20)
    gateway.fake.behaviours.update({PRIMARY: error(429, "org cap reached"), BACKUP: OK})
    # given: without a rule, the 429 (no hint, per-model quota) is charged to the pair only:
    # counted, no timer on the connection
    assert (await gateway.call("acme/m1")).status == 200
    assert await gateway.cooling_for(primary) == 0
    # when: an operator adds a rule in the admin
    response = await database_sync_to_async(post_error_rule)(
        staff_client,
        provider="acme",
        rule_id="acme-org-cap",
        status="429",
        match="org cap",
        scope="connection",
        reason="quota_exhausted",
        cooldown_ms="90000",
    )
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
    primary = add_connection(acme, "primary", PRIMARY, priority=10)
    backup = add_connection(acme, "backup", BACKUP, priority=20)
    gateway.fake.behaviours.update({PRIMARY: REFUSAL, BACKUP: OK})
    return primary, backup


async def refuse(gateway: Gateway, primary: int) -> ConnectionState:
    """One request the primary refuses (counted: the backup then serves it); its state."""
    calls = len(gateway.fake.calls)
    assert (await gateway.call("acme/m1")).status == 200
    assert gateway.fake.calls[calls:] == [PRIMARY, BACKUP]
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
    assert gateway.fake.calls == [
        PRIMARY,
        BACKUP,
        BACKUP,
        PRIMARY,
        BACKUP,
        PRIMARY,
        BACKUP,
        BACKUP,
    ]


async def test_a_refusal_arriving_during_the_cooldown_is_not_counted(
    gateway: Gateway, pair: tuple[int, int]
) -> None:
    primary, _ = pair
    gateway.fake.behaviours[PRIMARY] = gathering(2, REFUSAL)
    # given: two refusals in flight together; the second lands inside the first's cooldown
    replies = await asyncio.gather(gateway.call("acme/m1"), gateway.call("acme/m1"))
    # both fall over to the backup (another key may answer); only one is counted
    assert [reply.status for reply in replies] == [200, 200]
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


# An operator reset clears the streak, so the next refusal is a first one again.
async def test_the_operator_reset_clears_the_streak(
    gateway: Gateway, pair: tuple[int, int], process_store: None
) -> None:
    primary, _ = pair
    await refuse(gateway, primary)
    row = await ProviderConnection.objects.aget(pk=primary)
    await database_sync_to_async(connection_clear_error)(connection=row)

    again = await refuse(gateway, primary)

    assert again.remaining(gateway.clock.now) == 300
