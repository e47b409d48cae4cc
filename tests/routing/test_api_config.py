"""``GET/PUT /api/config``: the document over the management API, its auth, and the secret
rules (a reference is refused; a secret is a write-only value)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from omniroute.core.store import MemoryStore
from routing.config_document.reading import document_export
from routing.config_document.texts import export_yaml
from routing.models import Combo, FeatureFlag, ProviderConnection
from tests.config_support import Configured, configure, secret_of
from tests.routing.test_config_commands import api_of

pytestmark = pytest.mark.django_db

NEW_PROVIDER = {
    "slug": "delta",
    "name": "Delta",
    "category": "api_key",
    "base_url": "http://delta.test/v1",
}


@pytest.fixture
def configured(manage_client: APIClient, fresh_process_store: MemoryStore) -> Configured:
    return configure(api_of(manage_client), lambda slug, i: f"http://{slug}.test/c{i}/v1")


def test_get_needs_an_operator(api_client: APIClient, plain_key: str) -> None:
    assert api_client.get("/api/config").status_code == 401
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain_key}")
    assert api_client.get("/api/config").status_code == 403
    assert api_client.put("/api/config", {}, format="json").status_code == 403


def test_get_answers_the_export_as_json_or_yaml(
    configured: Configured, manage_client: APIClient
) -> None:
    as_json = manage_client.get("/api/config")
    as_yaml = manage_client.get("/api/config", HTTP_ACCEPT="application/yaml")

    assert as_json.status_code == 200
    assert as_json.json() == document_export()
    assert as_yaml["content-type"].startswith("application/yaml")
    assert as_yaml.content.decode() == export_yaml()
    assert secret_of("alpha", 1) not in as_json.content.decode()


def test_put_refuses_a_secret_reference(configured: Configured, manage_client: APIClient) -> None:
    document = manage_client.get("/api/config").json()

    response = manage_client.put("/api/config", document, format="json")

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert "connections[0].secret" in fields
    assert "not accepted here" in fields["connections[0].secret"][0]


def test_put_takes_a_secret_as_a_write_only_value(
    configured: Configured, manage_client: APIClient
) -> None:
    connection = {"provider": "delta", "name": "c1", "secret": "sk-delta-WRITE-ONLY-0001"}
    document = {"providers": [NEW_PROVIDER], "connections": [connection]}

    response = manage_client.put("/api/config", document, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {
        "changes": ["+ providers delta", "+ connections delta/c1"],
        "dry_run": False,
    }
    stored = ProviderConnection.objects.get(provider_id="delta", name="c1")
    assert stored.get_secret() == "sk-delta-WRITE-ONLY-0001"
    assert b"sk-delta-WRITE-ONLY-0001" not in manage_client.get("/api/config").content
    # Left out, the stored secret stays; the same document again changes nothing.
    again = manage_client.put(
        "/api/config", {"connections": [{"provider": "delta", "name": "c1"}]}, format="json"
    )
    assert again.json()["changes"] == []
    assert ProviderConnection.objects.get(pk=stored.pk).get_secret() == "sk-delta-WRITE-ONLY-0001"


def test_a_dry_run_changes_nothing(configured: Configured, manage_client: APIClient) -> None:
    document = {"feature_flags": [{"name": "emergency_fallback", "enabled": False}]}

    response = manage_client.put("/api/config?dry_run=true", document, format="json")

    assert response.json() == {
        "changes": ["~ feature_flags emergency_fallback: enabled, value"],
        "dry_run": True,
    }
    assert FeatureFlag.objects.get(name="emergency_fallback").enabled


def test_a_yaml_body_names_the_line_of_its_error(
    configured: Configured, manage_client: APIClient
) -> None:
    text = "providers:\n  - slug: delta\n    name: Delta\n    category: api_key\n    base_url: 7\n"

    response = manage_client.put("/api/config", text, content_type="application/yaml")

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "providers[0].base_url": ["line 5: must be a string"]
    }


def test_put_with_prune_removes_what_a_given_section_lacks(
    configured: Configured, manage_client: APIClient
) -> None:
    flags_only: dict[str, Any] = {"feature_flags": []}

    response = manage_client.put("/api/config?prune=1", flags_only, format="json")

    assert response.json()["changes"] == ["- feature_flags emergency_fallback"]
    assert not FeatureFlag.objects.exists()
    assert Combo.objects.count() == 4  # sections the body left out were left alone


def test_an_error_answers_json_even_when_yaml_was_asked(
    configured: Configured, manage_client: APIClient
) -> None:
    response = manage_client.put(
        "/api/config", {"surprise": []}, format="json", HTTP_ACCEPT="application/yaml"
    )

    assert response.status_code == 400
    assert response["content-type"] == "application/json"
    assert response.json()["error"]["fields"] == {"surprise": ["unknown section"]}


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"providers": ' + "[" * 2000 + "]" * 2000 + "}", "application/json"),
        ("providers: " + "[" * 2000 + "]" * 2000 + "\n", "application/yaml"),
    ],
    ids=["json", "yaml"],
)
def test_put_refuses_a_document_nested_too_deep(
    manage_client: APIClient, body: str, content_type: str
) -> None:
    response = manage_client.put("/api/config", body, content_type=content_type)

    assert response.status_code == 400
    assert response["content-type"].startswith("application/json")
    assert "error" in response.json()


@pytest.mark.parametrize("name", ["a\\ud800b", "a\\u0000b"], ids=["a lone surrogate", "a NUL"])
@pytest.mark.parametrize("dry_run", ["1", "0"])
def test_put_refuses_text_the_database_cannot_store(
    manage_client: APIClient, name: str, dry_run: str
) -> None:
    """Either once reached the database write: a 500 (UnicodeEncodeError, or PostgreSQL's NUL)."""
    body = '{"feature_flags": [{"name": "' + name + '", "enabled": true}]}'

    response = manage_client.put(
        f"/api/config?dry_run={dry_run}", body, content_type="application/json"
    )

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    if "ud800" in name:  # refused as the body is read, as by every management API view
        assert "lone surrogate" in error["message"]
    else:
        assert "feature_flags[0].name" in error["fields"]
