"""The admin at a glance without a browser: the connection list's live-state filter, the keys'
state badge, and the index's health line (tests/e2e/test_admin_layout.py measures the pages
in Chromium)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from leases.domain.tokens import owner_hash
from leases.services import lease_acquire
from omniroute.core.store import MemoryStore
from resilience.domain.breaker.policy import BreakerPolicy
from resilience.domain.connection_state import BANNED, UNAVAILABLE, ConnectionState
from resilience.services.breakers import breaker_record_failure
from resilience.services.connections import connection_key
from routing.admin.health import health_summary
from routing.models import ProviderConnection
from routing.services import api_key_create, api_key_revoke, connection_save
from tests.leases.support import new_owner
from tests.resilience.lockout_support import lock

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:routing_providerconnection_changelist")
BREAKERS = reverse("admin:resilience_circuitbreaker_changelist")
LEASES = reverse("admin:leases_exclusiveconnectionlease_changelist")


def _connection(like: ProviderConnection, name: str) -> int:
    made = connection_save(
        connection=ProviderConnection(), fields={"provider": like.provider, "name": name}
    )
    return made.pk


def _busy(store: MemoryStore, connection: ProviderConnection) -> dict[str, int]:
    """One cooling, one banned, one healthy with a locked model, an open breaker, a lease."""
    now = timezone.now()
    ids = {name: _connection(connection, name) for name in ("cooling", "banned", "locked")}
    cooling = ConnectionState(UNAVAILABLE, rate_limited_until=now.timestamp() + 90)
    async_to_sync(store.set)(connection_key(ids["cooling"]), cooling.to_dict())
    async_to_sync(store.set)(connection_key(ids["banned"]), ConnectionState(BANNED).to_dict())
    lock(store, connection.provider_id, ids["locked"], "gpt-4o", seconds=600)
    policy = BreakerPolicy(failure_threshold=2)
    for _ in range(2):
        async_to_sync(breaker_record_failure)(store=store, name="acme-down", policy=policy)
    lease_acquire(
        owner_hash=owner_hash(new_owner()),
        api_key_id=1,
        provider=connection.provider_id,
        connection_id=connection.pk,
        now=now,
    )
    return ids


def _names(client: Client, query: dict[str, str]) -> set[str]:
    response = client.get(CHANGELIST, query)
    return {str(row.name) for row in response.context["cl"].result_list}


def test_the_live_state_filter_lists_cooling_terminal_and_locked_connections(
    staff_client: Client, fresh_process_store: MemoryStore, connection: ProviderConnection
) -> None:
    _busy(fresh_process_store, connection)

    assert _names(staff_client, {"state": "cooling"}) == {"cooling"}
    assert _names(staff_client, {"state": "terminal"}) == {"banned"}
    assert _names(staff_client, {"state": "locked"}) == {"locked"}
    assert len(_names(staff_client, {})) == 4  # the fixture's connection too


def test_the_health_line_counts_each_state_and_links_to_its_list(
    fresh_process_store: MemoryStore, connection: ProviderConnection
) -> None:
    _busy(fresh_process_store, connection)

    figures = {f.label: (f.shown, f.url) for f in health_summary(timezone.now())}

    assert figures == {
        "open breakers": ("1", f"{BREAKERS}?state__exact=open"),
        "cooling connections": ("1", f"{CHANGELIST}?state=cooling"),
        "terminal connections": ("1", f"{CHANGELIST}?state=terminal"),
        "locked models": ("1", reverse("admin:resilience_modelcooldown_changelist")),
        "active leases": (
            "1",
            f"{LEASES}?state__exact=ACTIVE",
        ),
    }


def test_a_quiet_gateway_shows_zeros_and_the_index_renders_the_line(
    staff_client: Client, fresh_process_store: MemoryStore, connection: ProviderConnection
) -> None:
    later = timezone.now() + dt.timedelta(hours=1)
    assert [f.count for f in health_summary(later)] == [0, 0, 0, 0, 0]

    page = staff_client.get(reverse("admin:index")).content.decode()

    assert '<p id="health-summary">' in page
    assert 'data-figure="cooling-connections">0 cooling connections</a>' in page


def test_a_key_shows_one_state_with_the_time_left(staff_client: Client) -> None:
    now = timezone.now()
    keys: dict[str, dict[str, Any]] = {
        "soon": {"expires_at": now + dt.timedelta(minutes=90)},
        "later": {"expires_at": now + dt.timedelta(days=30, minutes=1)},
        "gone": {"expires_at": now - dt.timedelta(seconds=1)},
        "paused": {"is_active": False},
        "forever": {},
    }
    for name, fields in keys.items():
        api_key_create(name=name, **fields)
    api_key_revoke(key=api_key_create(name="stolen")[0], now=now)

    page = staff_client.get(reverse("admin:routing_clientapikey_changelist")).content.decode()

    shown = {"active, 1 h 30 min left", "active, 30 d left", "expired", "inactive", "revoked"}
    assert {text for text in shown if f'">{text}</span>' in page} == shown
    assert '">active</span>' in page  # the key that never expires
