"""The model catalog: validation in the service, the management API, the admin, the seed and
the configuration snapshot."""

from __future__ import annotations

import importlib
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ValidationError
from django.db import connection as db_connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from routing.domain.config.snapshot import CatalogEntry
from routing.models import ModelCatalogEntry, Provider
from routing.selectors import config_snapshot_build
from routing.services import catalog_entry_delete, catalog_entry_save, provider_delete
from tests.routing.api_support import error_fields

pytestmark = pytest.mark.django_db

URL = "/api/model-catalog/"


def _entry(provider: Provider, model: str = "thinker", **fields: Any) -> ModelCatalogEntry:
    return catalog_entry_save(
        entry=ModelCatalogEntry(), fields={"provider": provider, "model": model, **fields}
    )


# --- model and service ------------------------------------------------------------------------


def test_save_applies_defaults(provider: Provider) -> None:
    entry = _entry(provider)

    entry.refresh_from_db()
    assert entry.accepts_prefill == "unknown"
    assert (entry.context_window, entry.time_to_first_token_ms, entry.stream_idle_ms) == (
        None,
        None,
        None,
    )
    assert str(entry) == "mock/thinker"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("time_to_first_token_ms", 999),
        ("time_to_first_token_ms", 600_001),
        ("stream_idle_ms", 999),
        ("stream_idle_ms", 600_001),
        ("input_price_per_mtok", Decimal("-0.01")),
        ("output_price_per_mtok", Decimal("-1")),
        ("context_window", 0),
        ("accepts_prefill", "maybe"),
    ],
)
def test_save_refuses_out_of_bounds(provider: Provider, field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        _entry(provider, **{field: value})

    assert field in caught.value.message_dict
    assert not ModelCatalogEntry.objects.filter(model="thinker").exists()


@pytest.mark.parametrize("field", ["time_to_first_token_ms", "stream_idle_ms"])
@pytest.mark.parametrize("value", [1_000, 600_000])
def test_save_accepts_the_bounds(provider: Provider, field: str, value: int) -> None:
    fields: dict[str, Any] = {field: value}
    assert getattr(_entry(provider, **fields), field) == value


def test_one_entry_per_provider_and_model(provider: Provider, other_provider: Provider) -> None:
    _entry(provider, "shared")
    _entry(other_provider, "shared")  # another provider's model of the same name is fine

    with pytest.raises(ValidationError):
        _entry(provider, "shared")
    assert ModelCatalogEntry.objects.filter(model="shared").count() == 2


def test_writes_announce_a_change(
    provider: Provider, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as saved:
        entry = _entry(provider)
    with django_capture_on_commit_callbacks() as deleted:
        catalog_entry_delete(entry=entry)

    assert len(saved) == 1 and len(deleted) == 1
    assert not ModelCatalogEntry.objects.filter(pk=entry.pk).exists()


def test_entries_go_with_their_provider(db: None) -> None:
    provider = Provider.objects.create(
        slug="gone", name="Gone", category="api_key", base_url="https://gone.test/v1"
    )
    _entry(provider)

    provider_delete(provider=provider)

    assert not ModelCatalogEntry.objects.filter(provider_id="gone").exists()


# --- API --------------------------------------------------------------------------------------


def _payload(**overrides: Any) -> dict[str, Any]:
    return {
        "provider": "mock",
        "model": "thinker",
        "context_window": 200_000,
        "accepts_prefill": "yes",
        "time_to_first_token_ms": 180_000,
        "input_price_per_mtok": "1.25",
        "output_price_per_mtok": "10",
        **overrides,
    }


def test_api_crud(manage_client: APIClient, provider: Provider) -> None:
    created = manage_client.post(URL, _payload(), format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["provider"], body["model"], body["accepts_prefill"]) == ("mock", "thinker", "yes")
    assert (body["input_price_per_mtok"], body["output_price_per_mtok"]) == ("1.2500", "10.0000")
    assert body["stream_idle_ms"] is None
    url = f"{URL}{body['id']}/"

    patched = manage_client.patch(url, {"stream_idle_ms": 90_000}, format="json")
    assert patched.status_code == 200, patched.content
    stored = ModelCatalogEntry.objects.get(pk=body["id"])
    assert (stored.stream_idle_ms, stored.time_to_first_token_ms) == (90_000, 180_000)

    listed = manage_client.get(f"{URL}?provider=mock&model=thinker").json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]
    assert manage_client.get(f"{URL}?model=nothing-like-it").json()["results"] == []

    assert manage_client.delete(url).status_code == 204
    assert not ModelCatalogEntry.objects.filter(pk=body["id"]).exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("time_to_first_token_ms", 500),
        ("time_to_first_token_ms", 700_000),
        ("stream_idle_ms", 0),
        ("input_price_per_mtok", "-1"),
        ("output_price_per_mtok", "cheap"),
        ("accepts_prefill", "sometimes"),
        ("provider", "no-such-provider"),
    ],
)
def test_api_bad_value_is_400_naming_the_field(
    manage_client: APIClient, provider: Provider, field: str, value: Any
) -> None:
    response = manage_client.post(URL, _payload(**{field: value}), format="json")

    assert field in error_fields(response)
    assert not ModelCatalogEntry.objects.filter(model="thinker").exists()


def test_api_duplicate_is_400(manage_client: APIClient, provider: Provider) -> None:
    _entry(provider)

    response = manage_client.post(URL, _payload(), format="json")

    assert error_fields(response)
    assert ModelCatalogEntry.objects.filter(provider=provider, model="thinker").count() == 1


def test_api_writes_go_through_the_service(
    manage_client: APIClient, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> None:
        raise ValidationError({"model": "refused by the service"})

    monkeypatch.setattr("routing.api.views.catalog_entry_save", refuse)

    response = manage_client.post(URL, _payload(), format="json")

    assert error_fields(response)["model"] == ["refused by the service"]


@pytest.mark.parametrize("method", ["get", "post"])
def test_api_needs_an_operator(
    api_client: APIClient, plain_key: str, provider: Provider, method: str
) -> None:
    anonymous = getattr(api_client, method)(URL, _payload(), format="json")
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain_key}")
    unscoped = getattr(api_client, method)(URL, _payload(), format="json")

    assert anonymous.status_code == 401
    assert unscoped.status_code == 403
    assert not ModelCatalogEntry.objects.filter(model="thinker").exists()


def test_api_list_has_no_n_plus_one(manage_client: APIClient, provider: Provider) -> None:
    _entry(provider, "m0")
    with CaptureQueriesContext(db_connection) as few:
        manage_client.get(URL)
    for index in range(1, 4):
        _entry(provider, f"m{index}")
    with CaptureQueriesContext(db_connection) as many:
        manage_client.get(URL)

    assert len(many) == len(few)


# --- admin ------------------------------------------------------------------------------------


def _admin_url(view: str, *args: Any) -> str:
    return reverse(f"admin:routing_modelcatalogentry_{view}", args=args)


def _admin_form(**overrides: Any) -> dict[str, Any]:
    return {
        "provider": "mock",
        "model": "admin-made",
        "context_window": "128000",
        "accepts_prefill": "no",
        "time_to_first_token_ms": "",
        "stream_idle_ms": "",
        "input_price_per_mtok": "0.15",
        "output_price_per_mtok": "",
        **overrides,
    }


def test_admin_pages_render(staff_client: Client, provider: Provider) -> None:
    entry = _entry(provider, time_to_first_token_ms=180_000)

    changelist = staff_client.get(_admin_url("changelist"))
    assert changelist.status_code == 200
    assert b"thinker" in changelist.content and b"first token 180 s" in changelist.content
    assert staff_client.get(_admin_url("add")).status_code == 200
    assert staff_client.get(_admin_url("change", entry.pk)).status_code == 200
    searched = staff_client.get(_admin_url("changelist"), {"q": "thinker"})
    assert b"thinker" in searched.content


def test_admin_add_and_delete(staff_client: Client, provider: Provider) -> None:
    response = staff_client.post(_admin_url("add"), _admin_form())

    assert response.status_code == 302, response.content
    entry = ModelCatalogEntry.objects.get(model="admin-made")
    assert (entry.context_window, entry.input_price_per_mtok) == (128_000, Decimal("0.15"))
    assert entry.output_price_per_mtok is None

    staff_client.post(_admin_url("delete", entry.pk), {"post": "yes"})
    assert not ModelCatalogEntry.objects.filter(pk=entry.pk).exists()


def test_admin_out_of_bounds_is_a_form_error(staff_client: Client, provider: Provider) -> None:
    response = staff_client.post(_admin_url("add"), _admin_form(time_to_first_token_ms="100"))

    assert response.status_code == 200
    assert "greater than or equal to 1000" in response.content.decode()
    assert not ModelCatalogEntry.objects.filter(model="admin-made").exists()


def test_admin_changelist_has_no_n_plus_one(staff_client: Client, provider: Provider) -> None:
    _entry(provider, "m0")
    with CaptureQueriesContext(db_connection) as few:
        staff_client.get(_admin_url("changelist"))
    for index in range(1, 4):
        _entry(provider, f"m{index}")
    with CaptureQueriesContext(db_connection) as many:
        staff_client.get(_admin_url("changelist"))

    assert len(many) == len(few)


# --- the seed migration -----------------------------------------------------------------------

CATALOG_SEED = importlib.import_module("routing.migrations.0007_seed_model_catalog")


def test_the_migration_seeded_the_common_models(db: None) -> None:
    seeded = {
        (e.provider_id, e.model): e
        for e in ModelCatalogEntry.objects.filter(provider_id__in=["openai", "anthropic"])
    }

    o3, sonnet, mini = (
        seeded["openai", "o3"],
        seeded["anthropic", "claude-sonnet-4-20250514"],
        seeded["openai", "gpt-4o-mini"],
    )
    assert (o3.accepts_prefill, o3.time_to_first_token_ms) == ("no", 180_000)
    assert (sonnet.accepts_prefill, sonnet.context_window) == ("yes", 200_000)
    assert (mini.input_price_per_mtok, mini.output_price_per_mtok) == (
        Decimal("0.15"),
        Decimal("0.60"),
    )
    seeded_slugs = set(ModelCatalogEntry.objects.values_list("provider_id", flat=True))
    assert {"openai", "anthropic", "gemini", "deepseek", "mistral", "groq"} <= seeded_slugs


def test_the_seed_skips_deleted_providers_and_keeps_operator_rows(db: None) -> None:
    ModelCatalogEntry.objects.all().delete()
    Provider.objects.filter(slug="groq").delete()
    mine = _entry(Provider.objects.get(slug="openai"), "gpt-4o", context_window=1)

    CATALOG_SEED.seed(django_apps, None)

    assert not ModelCatalogEntry.objects.filter(provider_id="groq").exists()
    assert ModelCatalogEntry.objects.filter(provider_id="openai", model="o3").exists()
    mine.refresh_from_db()
    assert mine.context_window == 1  # the operator's row is left as it was


def test_the_unseed_removes_only_seeded_rows(provider: Provider) -> None:
    mine = _entry(provider, "operator-added")

    CATALOG_SEED.unseed(django_apps, None)

    assert list(ModelCatalogEntry.objects.all()) == [mine]


# --- the snapshot -----------------------------------------------------------------------------


def test_the_snapshot_carries_the_catalog(provider: Provider) -> None:
    _entry(
        provider,
        accepts_prefill="yes",
        context_window=200_000,
        time_to_first_token_ms=180_000,
        input_price_per_mtok=Decimal("1.25"),
    )

    snapshot = config_snapshot_build(version=1, remote_version=0)

    assert snapshot.catalog_entry("mock", "thinker") == CatalogEntry(
        provider="mock",
        model="thinker",
        context_window=200_000,
        accepts_prefill="yes",
        time_to_first_token_ms=180_000,
        stream_idle_ms=None,
        input_price_per_mtok=1.25,
        output_price_per_mtok=None,
    )
    assert snapshot.catalog_entry("openai", "thinker") is None
    assert snapshot.catalog_entry("openai", "o3") is not None  # seeded


def test_the_snapshot_reads_the_catalog_in_one_query(provider: Provider) -> None:
    with CaptureQueriesContext(db_connection) as few:
        config_snapshot_build(version=1, remote_version=0)
    for index in range(3):
        _entry(provider, f"m{index}")
    with CaptureQueriesContext(db_connection) as many:
        snapshot = config_snapshot_build(version=1, remote_version=0)

    assert len(many) == len(few)
    assert {("mock", f"m{index}") for index in range(3)} <= set(snapshot.catalog)
