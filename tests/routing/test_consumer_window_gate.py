"""The window gate, end to end through the chat consumer.

An ``httpx.MockTransport`` plays the upstream and a ``MemoryStore`` on a fake clock holds the
resilience state, so the gate's cooldowns pass without sleeping.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from resilience.services import resilience_settings_update
from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.breaker_support import A_BACKUP_SECRET, A_SECRET, MODEL
from tests.routing.harness import OK, UNAVAILABLE, Gateway

pytestmark = pytest.mark.django_db(transaction=True)


GATE_SECONDS = 5
GATE = {"enabled": True, "minRetryCooldownMs": GATE_SECONDS * 1000}
GATE_SETTINGS = {"providerCooldown": {**GATE, "maxRetryCooldownMs": 300_000}}


def add_combo(name: str, provider: Provider) -> None:
    targets = [{"provider": provider, "model": MODEL}]
    combo_save(combo=Combo(), fields={"name": name}, targets=targets)


@pytest.fixture
def window_gate(db: None) -> None:
    """The window gate on, a failed connection held 5 s (doubling per failure)."""
    resilience_settings_update(patch=GATE_SETTINGS)


# --- 7. window gate -------------------------------------------------------------------------


async def test_the_window_gate_holds_a_failed_combo_connection_until_its_cooldown_ends(
    gateway: Gateway, acme: Provider, acme_primary: int, acme_backup: int, window_gate: None
) -> None:
    await database_sync_to_async(add_combo)("gated", acme)
    fake = gateway.fake
    fake.behaviours.update({A_SECRET: UNAVAILABLE, A_BACKUP_SECRET: OK})
    # given: the primary failed and the backup served
    assert (await gateway.call("gated")).decision()["connection"] == str(acme_backup)
    # when / then: the primary is held without being asked
    held = await gateway.call("gated")
    assert held.decision()["connection"] == str(acme_backup)
    assert held.decision()["excluded"] == f"acme/{MODEL}@{acme_primary}:connection_cooldown"
    assert fake.calls == [A_SECRET, A_BACKUP_SECRET, A_BACKUP_SECRET]
    # when / then: 5 s later it is tried again, and serves
    fake.behaviours[A_SECRET] = OK
    gateway.clock.advance(GATE_SECONDS)
    again = await gateway.call("gated")
    assert again.decision()["connection"] == str(acme_primary)
    assert "excluded" not in again.decision()


async def test_a_success_clears_the_window_gate_backoff(
    gateway: Gateway, acme: Provider, acme_primary: int, acme_backup: int, window_gate: None
) -> None:
    # given: the primary failed, cooled down, served once, then failed once more
    await database_sync_to_async(add_combo)("gated", acme)
    fake = gateway.fake
    fake.behaviours.update({A_SECRET: UNAVAILABLE, A_BACKUP_SECRET: OK})
    await gateway.call("gated")
    gateway.clock.advance(GATE_SECONDS)
    fake.behaviours[A_SECRET] = OK
    assert (await gateway.call("gated")).decision()["connection"] == str(acme_primary)
    fake.behaviours[A_SECRET] = UNAVAILABLE
    await gateway.call("gated")
    # when: the first cooldown (5 s) has passed, not the doubled one (10 s)
    gateway.clock.advance(GATE_SECONDS)
    fake.behaviours[A_SECRET] = OK
    reply = await gateway.call("gated")
    # then: the success had reset the count, so the primary is tried again
    assert reply.decision()["connection"] == str(acme_primary)
    assert "excluded" not in reply.decision()
