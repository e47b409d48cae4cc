"""The routing admin: pages render, writes go through services, secrets never shown."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages
from django.core.exceptions import ValidationError
from django.db import connection as db_connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from routing.models import ClientApiKey, Combo, Provider, ProviderConnection
from routing.services import api_key_create, combo_save, connection_save
from routing.services.connections import SECRET_NOT_A_HEADER
from tests.routing.conftest import UPSTREAM_SECRET

pytestmark = pytest.mark.django_db

ADMIN_SECRET = "sk-admin-typed-SECRET-5555aaaa"


@pytest.fixture
def key(db: None) -> ClientApiKey:
    """A saved client key (its plaintext is discarded)."""
    return api_key_create(name="ci", scopes=["manage"])[0]


@pytest.fixture
def combo(provider: Provider, connection: ProviderConnection) -> Combo:
    """A combo with two targets, the first pinned to ``connection``."""
    targets = [
        {"provider": provider, "model": "fast", "connection": connection},
        {"provider": provider, "model": "slow"},
    ]
    return combo_save(combo=Combo(), fields={"name": "team"}, targets=targets)


def _url(model: str, view: str, *args: Any) -> str:
    return reverse(f"admin:routing_{model}_{view}", args=args)


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _connection_form(**overrides: Any) -> dict[str, Any]:
    return {
        "provider": "mock",
        "name": "admin-made",
        "priority": "100",
        "is_active": "on",
        "auth_type": "api_key",
        "base_url": "",
        "served_models": "mock-small\nmock-large",
        "max_concurrent": "",
        "extras": "{}",
        "secret": ADMIN_SECRET,
        "refresh_secret": "",
        **overrides,
    }


@pytest.mark.parametrize("model", ["provider", "providerconnection", "clientapikey", "combo"])
def test_changelist_and_add_pages_render(staff_client: Client, model: str) -> None:
    assert staff_client.get(_url(model, "changelist")).status_code == 200
    assert staff_client.get(_url(model, "add")).status_code == 200


def test_change_pages_render(
    staff_client: Client, connection: ProviderConnection, key: ClientApiKey, combo: Combo
) -> None:
    for model, pk in [
        ("provider", "mock"),
        ("providerconnection", connection.pk),
        ("clientapikey", key.pk),
        ("combo", combo.pk),
    ]:
        assert staff_client.get(_url(model, "change", pk)).status_code == 200, model


def test_connection_add_encrypts_and_never_shows_the_secret(staff_client: Client) -> None:
    response = staff_client.post(_url("providerconnection", "add"), _connection_form())

    assert response.status_code == 302, response.content
    stored = ProviderConnection.objects.get(name="admin-made")
    assert stored.secret_encrypted and ADMIN_SECRET not in stored.secret_encrypted
    assert stored.get_secret() == ADMIN_SECRET
    assert stored.served_models == ["mock-small", "mock-large"]
    for url in (
        _url("providerconnection", "changelist"),
        _url("providerconnection", "change", stored.pk),
    ):
        page = staff_client.get(url)
        assert ADMIN_SECRET.encode() not in page.content
        assert stored.secret_encrypted.encode() not in page.content
        assert "••••aaaa".encode() in page.content


def test_connection_change_blank_keeps_and_clear_empties_the_secret(
    staff_client: Client, connection: ProviderConnection
) -> None:
    url = _url("providerconnection", "change", connection.pk)
    page = staff_client.get(url)
    assert UPSTREAM_SECRET.encode() not in page.content

    staff_client.post(url, _connection_form(name="primary", secret="", priority="5"))
    connection.refresh_from_db()
    assert (connection.priority, connection.get_secret()) == (5, UPSTREAM_SECRET)

    staff_client.post(url, _connection_form(name="primary", secret="", clear_secret="on"))
    connection.refresh_from_db()
    assert not connection.has_secret


def test_a_secret_that_cannot_be_a_header_is_refused_on_its_field(staff_client: Client) -> None:
    secret = "sk-caf\u00e9-secret"
    response = staff_client.post(_url("providerconnection", "add"), _connection_form(secret=secret))

    assert response.status_code == 200  # the form again, with the field's error
    assert response.context["adminform"].form.errors["secret"] == [SECRET_NOT_A_HEADER]
    assert secret.encode() not in response.content
    assert not ProviderConnection.objects.filter(name="admin-made").exists()


def test_connection_service_error_is_reported_and_rolled_back(
    staff_client: Client, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> None:
        raise ValidationError("refused by the service")

    monkeypatch.setattr("routing.admin.connections.connection_save", refuse)

    response = staff_client.post(_url("providerconnection", "add"), _connection_form(), follow=True)

    assert response.status_code == 200
    assert "refused by the service" in _messages(response)
    assert not ProviderConnection.objects.filter(name="admin-made").exists()


def test_clear_errors_action(staff_client: Client, connection: ProviderConnection) -> None:
    ProviderConnection.objects.filter(pk=connection.pk).update(
        rate_limited_until=timezone.now() + timedelta(seconds=42),
        test_status="banned",
        last_error_type="auth",
        backoff_level=4,
    )
    changelist = staff_client.get(_url("providerconnection", "changelist")).content.decode()
    assert ">banned</span>" in changelist  # a terminal state outranks its running cooldown

    response = staff_client.post(
        _url("providerconnection", "changelist"),
        {"action": "clear_errors", "_selected_action": [connection.pk]},
        follow=True,
    )

    assert "Cleared cooldown and errors of 1 connection(s)." in _messages(response)
    connection.refresh_from_db()
    assert (connection.test_status, connection.backoff_level) == ("active", 0)
    assert connection.rate_limited_until is None and connection.last_error_type == ""


def test_connection_delete_goes_through_the_service(
    staff_client: Client, connection: ProviderConnection
) -> None:
    response = staff_client.post(
        _url("providerconnection", "delete", connection.pk), {"post": "yes"}
    )

    assert response.status_code == 302
    assert not ProviderConnection.objects.filter(pk=connection.pk).exists()


def test_provider_in_use_cannot_be_deleted(
    staff_client: Client, connection: ProviderConnection
) -> None:
    response = staff_client.post(_url("provider", "delete", "mock"), {"post": "yes"})

    assert response.status_code == 200
    assert Provider.objects.filter(slug="mock").exists()


def test_key_add_shows_the_plaintext_exactly_once(
    staff_client: Client, connection: ProviderConnection
) -> None:
    data = {
        "name": "admin-key",
        "scopes": ["manage"],
        "allowed_models": "mock/*, openai/gpt-4o",
        "allowed_connections": [connection.pk],
        "expires_at_0": "",
        "expires_at_1": "",
        "is_active": "on",
    }

    response = staff_client.post(_url("clientapikey", "add"), data, follow=True)

    shown = [m for m in _messages(response) if m.startswith("Copy this key now")]
    assert len(shown) == 1
    plaintext = re.search(r"sk-omr-\S+", shown[0]).group(0)  # type: ignore[union-attr]
    assert response.content.decode().count(plaintext) == 1
    key = ClientApiKey.objects.get(name="admin-key")
    assert key.scopes == ["manage"] and key.allowed_models == ["mock/*", "openai/gpt-4o"]
    assert list(key.allowed_connections.all()) == [connection]
    for url in (_url("clientapikey", "changelist"), _url("clientapikey", "change", key.pk)):
        page = staff_client.get(url).content
        assert plaintext.encode() not in page
        assert key.key_hash.encode() not in page


def test_key_change_updates_through_the_service(staff_client: Client, key: ClientApiKey) -> None:
    data = {
        "name": "renamed",
        "scopes": [],
        "allowed_models": "",
        "expires_at_0": "",
        "expires_at_1": "",
    }

    response = staff_client.post(_url("clientapikey", "change", key.pk), data, follow=True)

    assert not any(m.startswith("Copy this key") for m in _messages(response))
    key.refresh_from_db()
    assert (key.name, key.scopes, key.is_active) == ("renamed", [], False)


def test_revoke_keys_action(staff_client: Client, key: ClientApiKey) -> None:
    response = staff_client.post(
        _url("clientapikey", "changelist"),
        {"action": "revoke_keys", "_selected_action": [key.pk]},
        follow=True,
    )

    assert "Revoked 1 key(s)." in _messages(response)
    key.refresh_from_db()
    assert key.revoked_at is not None and not key.is_active


def test_key_delete(staff_client: Client, key: ClientApiKey) -> None:
    staff_client.post(_url("clientapikey", "delete", key.pk), {"post": "yes"})
    assert not ClientApiKey.objects.filter(pk=key.pk).exists()


def _combo_form(rows: list[dict[str, Any]], initial: int = 0, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "fast",
        "strategy": "priority",
        "is_active": "on",
        "description": "",
        "targets-TOTAL_FORMS": str(len(rows)),
        "targets-INITIAL_FORMS": str(initial),
        "targets-MIN_NUM_FORMS": "0",
        "targets-MAX_NUM_FORMS": "1000",
        **fields,
    }
    for index, row in enumerate(rows):
        data.update({f"targets-{index}-{name}": value for name, value in row.items()})
    return data


def test_combo_add_with_inline_targets(
    staff_client: Client, connection: ProviderConnection
) -> None:
    rows: list[dict[str, Any]] = [
        {
            "position": "1",
            "provider": "mock",
            "model": "b",
            "connection": connection.pk,
            "weight": "1",
        },
        {"position": "0", "provider": "openai", "model": "a", "connection": "", "weight": "2"},
    ]

    response = staff_client.post(_url("combo", "add"), _combo_form(rows))

    assert response.status_code == 302, response.content
    combo = Combo.objects.get(name="fast")
    targets = [(t.position, t.provider_id, t.model, t.connection_id) for t in combo.targets.all()]
    assert targets == [(0, "openai", "a", None), (1, "mock", "b", connection.pk)]


def test_combo_change_deletes_a_target(staff_client: Client, combo: Combo) -> None:
    first, second = combo.targets.all()
    rows = [
        {
            "id": first.pk,
            "combo": combo.pk,
            "position": "0",
            "provider": "mock",
            "model": "fast",
            "weight": "1",
            "DELETE": "on",
        },
        {
            "id": second.pk,
            "combo": combo.pk,
            "position": "1",
            "provider": "mock",
            "model": "slow",
            "weight": "1",
        },
    ]

    response = staff_client.post(
        _url("combo", "change", combo.pk), _combo_form(rows, initial=2, name="team")
    )

    assert response.status_code == 302, response.content
    assert [(t.position, t.model) for t in combo.targets.all()] == [(0, "slow")]
    history = LogEntry.objects.get(object_id=str(combo.pk))
    assert "Deleted combo target" in history.get_change_message()


@pytest.mark.parametrize(
    ("fields", "row", "error"),
    [
        ({"strategy": "no-such-strategy"}, {}, "Select a valid choice"),
        ({}, {"provider": "openai"}, "belongs to another provider"),
    ],
)
def test_combo_invalid_input_is_a_form_error(
    staff_client: Client,
    connection: ProviderConnection,
    fields: dict[str, Any],
    row: dict[str, Any],
    error: str,
) -> None:
    rows = [
        {
            "position": "0",
            "provider": "mock",
            "model": "m",
            "connection": connection.pk,
            "weight": "1",
            **row,
        }
    ]

    response = staff_client.post(_url("combo", "add"), _combo_form(rows, **fields))

    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Combo.objects.exists()


def _add_rows(provider: Provider, names: range) -> None:
    """One connection, one key allowed on it and one combo per name."""
    for index in names:
        conn = connection_save(
            connection=ProviderConnection(), fields={"provider": provider, "name": f"n{index}"}
        )
        api_key_create(name=f"k{index}", allowed_connections=[conn])
        combo_save(
            combo=Combo(),
            fields={"name": f"c{index}"},
            targets=[{"provider": provider, "model": "m"}],
        )


def _query_diff(few: CaptureQueriesContext, many: CaptureQueriesContext) -> str:
    """The statements of both reads, so a failure names the query that appeared."""
    lines = [f"- {q['sql'][:160]}" for q in few.captured_queries]
    lines += [f"+ {q['sql'][:160]}" for q in many.captured_queries]
    return "\n".join(lines)


@pytest.mark.parametrize("model", ["providerconnection", "clientapikey", "combo"])
def test_changelists_have_no_n_plus_one(
    staff_client: Client, provider: Provider, combo: Combo, model: str
) -> None:
    url = _url(model, "changelist")
    # One row of each first, and a page read before counting: the per-row paths and any
    # one-time work of the process (a store restored from the database) run before `few`.
    _add_rows(provider, range(1))
    staff_client.get(url)
    with CaptureQueriesContext(db_connection) as few:
        staff_client.get(url)
    _add_rows(provider, range(1, 4))

    with CaptureQueriesContext(db_connection) as many:
        staff_client.get(url)

    assert len(many) == len(few), _query_diff(few, many)


@pytest.mark.parametrize(
    "extras", ['{"a": "\\ud800"}', '{"\\ud800": 1}', '{"a": "b\\u0000c"}'], ids=str
)
def test_extras_holding_text_no_column_keeps_is_the_fields_error(
    staff_client: Client, extras: str
) -> None:
    # A lone surrogate was saved, then every read of the row (API list, config export, its
    # change page) was a 500; re-shown with its error, the page itself was a 500.
    response = staff_client.post(_url("providerconnection", "add"), _connection_form(extras=extras))

    assert response.status_code == 200  # the form again, with the field's error
    assert response.context["adminform"].form.errors["extras"]
    assert not ProviderConnection.objects.filter(name="admin-made").exists()


@pytest.mark.parametrize(
    "field", [("options", '{"\\ud800": 1}'), ("attempt_overrides", '{"\\ud800": 1}')], ids=str
)
def test_a_combo_json_field_with_a_lone_surrogate_is_shown_again_escaped(
    staff_client: Client, field: tuple[str, str]
) -> None:
    name, value = field

    response = staff_client.post(_url("combo", "add"), _combo_form([], 0, **{name: value}))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors[name]
    assert b"\\ud800" in response.content  # JSON's escape, which a page can carry


@pytest.mark.parametrize("model", ["provider", "providerconnection", "combo"])
def test_a_search_longer_than_any_name_finds_nothing_and_says_why(
    staff_client: Client, model: str
) -> None:
    # SQLite refuses a LIKE pattern over 50 000 bytes: the changelist was a 500
    response = staff_client.get(_url(model, "changelist"), {"q": "_" * 30_000})

    assert response.status_code == 200
    assert "A search is at most 1000 characters." in _messages(response)
