"""Re-checks of expired OAuth connections: selection, backoff, probe, command,
and the pass routing hands to the resilience housekeeping."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.core.management import call_command

from omniroute.core.state import get_store
from resilience.domain.connection_state import ConnectionState
from resilience.services import housekeeping
from resilience.services.connections import connection_key, connection_state_get
from routing.models import Provider, ProviderConnection
from routing.services import connection_save, expired
from routing.services.expired import (
    EXPIRED_RETRY_MAX,
    RecheckOutcome,
    expired_recheck,
    expired_recheck_due,
    expired_recheck_pass,
    expired_retry_delay,
    probe_models,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "oauth-access-token-123"


class FakeProbe:
    """A probe answering from a script (default: always fails), recording what it saw."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.seen: list[int] = []

    def __call__(self, connection: ProviderConnection) -> bool:
        self.seen.append(connection.pk)
        return self.answers.pop(0) if self.answers else False


def _provider(slug: str, category: str, wire_format: str = "openai") -> Provider:
    provider, _ = Provider.objects.get_or_create(
        slug=slug,
        defaults={
            "name": slug,
            "category": category,
            "base_url": f"https://{slug}.example/v1",
            "wire_format": wire_format,
        },
    )
    return provider


def _connection(provider: Provider, name: str = "acct", **state: Any) -> ProviderConnection:
    connection = connection_save(
        connection=ProviderConnection(), fields={"provider": provider, "name": name}, secret=SECRET
    )
    ProviderConnection.objects.filter(pk=connection.pk).update(
        **{"test_status": "expired", "last_error": "401 token expired", **state}
    )
    connection.refresh_from_db()
    return connection


def _due(now: datetime) -> list[int]:
    return [c.pk for c in expired_recheck_due(now)]


@pytest.fixture
def oauth(db: None) -> Provider:
    return _provider("oauth-test", "oauth")


@pytest.fixture
def store() -> Iterator[None]:
    """A fresh process store (memory unless REDIS_URL), emptied afterwards."""
    get_store.cache_clear()
    yield
    async_to_sync(get_store().clear_prefix)("")
    get_store.cache_clear()


# --- pure ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "minutes"), [(1, 5), (2, 10), (3, 20), (4, 40)])
def test_backoff_doubles_from_five_minutes(count: int, minutes: int) -> None:
    assert expired_retry_delay(count) == timedelta(minutes=minutes)


# --- selection ----------------------------------------------------------------------------------


def test_due_selects_expired_oauth_connections_only(oauth: Provider) -> None:
    due = _connection(oauth, "due")
    _connection(oauth, "banned", test_status="banned")
    _connection(oauth, "active", test_status="active")
    _connection(oauth, "switched-off", is_active=False)
    _connection(oauth, "given-up", expired_retry_count=EXPIRED_RETRY_MAX)
    _connection(_provider("key-test", "api_key"), "api-key")
    _connection(_provider("local-test", "local"), "local")

    assert _due(NOW) == [due.pk]


def test_due_respects_the_retry_time(oauth: Provider) -> None:
    later = _connection(oauth, "later", expired_retry_at=NOW + timedelta(seconds=1))
    now = _connection(oauth, "now", expired_retry_at=NOW)

    assert _due(NOW) == [now.pk]
    assert set(_due(NOW + timedelta(seconds=1))) == {now.pk, later.pk}


# --- one re-check -------------------------------------------------------------------------------


@pytest.mark.usefixtures("store")
def test_success_clears_the_connection_row_and_store(oauth: Provider) -> None:
    connection = _connection(oauth, expired_retry_count=1, expired_retry_at=NOW)
    live = get_store()
    async_to_sync(live.set)(connection_key(connection.pk), {"test_status": "expired"})
    probe = FakeProbe(True)

    result = expired_recheck(connection=connection, now=NOW, probe=probe)

    assert result.outcome is RecheckOutcome.RECOVERED
    assert probe.seen == [connection.pk]
    row = ProviderConnection.objects.get(pk=connection.pk)
    assert (row.test_status, row.last_error, row.expired_retry_count) == ("active", "", 0)
    assert row.expired_retry_at is None
    state = async_to_sync(connection_state_get)(
        store=live, connection_id=connection.pk, durable=ConnectionState()
    )
    assert state.is_eligible(NOW.timestamp())


def test_failures_back_off_5_10_20_minutes_then_stop(oauth: Provider) -> None:
    connection = _connection(oauth)
    probe = FakeProbe()
    now = NOW
    expected = [
        (RecheckOutcome.RETRY_SCHEDULED, 1, 5),
        (RecheckOutcome.RETRY_SCHEDULED, 2, 10),
        (RecheckOutcome.GAVE_UP, 3, 20),
    ]

    for outcome, count, minutes in expected:
        # when
        results = expired_recheck_pass(now=now, probe=probe)
        # then
        row = ProviderConnection.objects.get(pk=connection.pk)
        assert [r.outcome for r in results] == [outcome]
        assert (row.test_status, row.expired_retry_count) == ("expired", count)
        assert row.expired_retry_at == now + timedelta(minutes=minutes)
        assert _due(row.expired_retry_at - timedelta(seconds=1)) == []
        now = row.expired_retry_at

    assert len(probe.seen) == EXPIRED_RETRY_MAX
    assert expired_recheck_pass(now=now + timedelta(days=365), probe=probe) == []
    assert len(probe.seen) == EXPIRED_RETRY_MAX


def test_a_raising_probe_counts_as_a_failure(oauth: Provider) -> None:
    connection = _connection(oauth)

    def broken(connection: ProviderConnection) -> bool:
        raise RuntimeError("boom")

    result = expired_recheck(connection=connection, now=NOW, probe=broken)

    assert (result.outcome, result.retry_count) == (RecheckOutcome.RETRY_SCHEDULED, 1)


def test_a_stale_copy_is_skipped_without_probing(oauth: Provider) -> None:
    stale = _connection(oauth)
    expired_recheck(
        connection=ProviderConnection.objects.get(pk=stale.pk), now=NOW, probe=FakeProbe()
    )
    probe = FakeProbe(True)

    result = expired_recheck(connection=stale, now=NOW, probe=probe)  # another process won

    assert result.outcome is RecheckOutcome.SKIPPED
    assert probe.seen == []
    assert ProviderConnection.objects.get(pk=stale.pk).expired_retry_count == 1


# --- the default probe --------------------------------------------------------------------------


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """``httpx.get`` answered by a mock transport: 200 unless the path says otherwise."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if "down" in request.url.host:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(401 if "denied" in request.url.host else 200, json={"data": []})

    def get(url: str, **kwargs: Any) -> httpx.Response:
        assert kwargs["timeout"] <= 10
        with httpx.Client(transport=httpx.MockTransport(handler)) as client:
            return client.get(url, headers=kwargs["headers"])

    monkeypatch.setattr(expired.httpx, "get", get)
    return seen


@pytest.mark.parametrize(("slug", "ok"), [("oauth-test", True), ("denied", False), ("down", False)])
def test_default_probe_lists_models_with_the_secret(
    upstream: list[httpx.Request], db: None, slug: str, ok: bool
) -> None:
    connection = _connection(_provider(slug, "oauth"))

    assert probe_models(connection) is ok

    assert str(upstream[0].url) == f"https://{slug}.example/v1/models"
    assert upstream[0].headers["authorization"] == f"Bearer {SECRET}"


def test_default_probe_speaks_anthropic(upstream: list[httpx.Request], db: None) -> None:
    connection = _connection(_provider("claude-oauth", "oauth", wire_format="anthropic"))

    assert probe_models(connection)

    assert upstream[0].headers["x-api-key"] == SECRET
    assert "authorization" not in upstream[0].headers


# --- the command and the background pass ------------------------------------------------------


@pytest.mark.usefixtures("store")
def test_command_runs_one_pass(oauth: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    good = _connection(oauth, "good")
    bad = _connection(oauth, "bad")
    monkeypatch.setattr(expired, "probe_models", lambda c: c.pk == good.pk)
    out = StringIO()

    call_command("recheck_expired", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "oauth-test/good: recovered, active again"
    assert lines[1].startswith("oauth-test/bad: still expired (re-check 1/3 failed, next at ")
    assert lines[2] == "Re-checked 2 expired connection(s)."
    assert ProviderConnection.objects.get(pk=bad.pk).expired_retry_count == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("store")
async def test_background_pass_clears_a_recovered_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def setup() -> ProviderConnection:
        return _connection(_provider("oauth-bg", "oauth"))

    connection = await database_sync_to_async(setup)()
    monkeypatch.setattr(expired, "probe_models", lambda c: True)

    await housekeeping._recheck_expired()

    row = await ProviderConnection.objects.aget(pk=connection.pk)
    assert row.test_status == "active"
