"""The API docs page (Swagger UI from local assets), the schema (the management API and the
``/v1`` client APIs, every operation tagged by area), and the ``/api/`` root: served to
operators (a staff session or a ``manage`` key), to anyone with debug on or
``OMNIROUTE_PUBLIC_API_DOCS``, and to no one else."""

from __future__ import annotations

import dataclasses
import io
import re
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings

from routing.api import openapi
from routing.domain.client.endpoints import CHAT_COMPLETIONS, CLIENT_APIS
from routing.services import api_key_create

pytestmark = pytest.mark.django_db

PRIVATE = ["/api/", "/api/schema/", "/api/docs/"]


@pytest.fixture
def client(staff_client: Client) -> Client:
    """A staff session: the pages below are an operator's."""
    return staff_client


AREAS = {
    "providers": "/api/providers/",
    "connections": "/api/connections/",
    "keys": "/api/keys/",
    "combos": "/api/combos/",
    "model-catalog": "/api/model-catalog/",
    "v1/session-leases": "/api/v1/session-leases",
    "resilience": "/api/resilience",
    "resilience/reset": "/api/resilience/reset",
    "resilience/model-cooldowns": "/api/resilience/model-cooldowns",
    "monitoring/health": "/api/monitoring/health",
    "schema": "/api/schema/",
    "docs": "/api/docs/",
}


def test_docs_page_loads_swagger_ui_from_local_static_files(client: Client) -> None:
    response = client.get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "/api/schema/" in page
    scripts = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any(s.endswith("swagger-ui-bundle.js") for s in scripts), scripts
    for asset in scripts:
        assert not asset.startswith(("http:", "https:", "//")), f"{asset} needs the internet"
        if asset.startswith("/static/"):
            assert finders.find(asset.removeprefix("/static/")), f"{asset} is not installed"


def test_schema_is_still_served(client: Client) -> None:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert "/api/providers/" in response.json()["paths"]


def test_api_root_lists_every_area_with_its_url(client: Client) -> None:
    response = client.get("/api/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    listed = response.json()
    for label, path in AREAS.items():
        assert listed.get(label) == f"http://testserver{path}", label
    # Every listed URL is a route of the gateway, not a 404.
    for url in listed.values():
        assert client.get(url.removeprefix("http://testserver")).status_code != 404, url


def test_api_root_lists_no_detail_route(client: Client) -> None:
    listed = client.get("/api/", HTTP_ACCEPT="application/json").json()
    assert not [url for url in listed.values() if "<" in url or "(" in url or "format" in url]


@pytest.mark.parametrize("path", PRIVATE)
def test_a_stranger_learns_nothing_of_the_management_surface(path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 401
    for word in ("providers", "session-leases", "swagger", "openapi"):
        assert word not in response.content.decode().lower()


@pytest.mark.parametrize("path", PRIVATE)
def test_a_client_key_without_manage_is_refused_and_a_manage_key_served(path: str) -> None:
    _, plain = api_key_create(name="client", scopes=[])
    _, manage = api_key_create(name="operator", scopes=["manage"])
    refused = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert refused.status_code == 403
    assert Client().get(path, HTTP_AUTHORIZATION=f"Bearer {manage}").status_code == 200


@pytest.mark.parametrize("path", PRIVATE)
def test_the_docs_are_public_when_opted_in_or_with_debug_on(settings: Settings, path: str) -> None:
    settings.PUBLIC_API_DOCS = True
    assert Client().get(path).status_code == 200
    settings.PUBLIC_API_DOCS, settings.DEBUG = False, True
    assert Client().get(path).status_code == 200


def _schema(client: Client) -> dict[str, Any]:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return dict(response.json())


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    methods = {"get", "put", "post", "patch", "delete", "options", "head"}
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in methods
    ]


def test_schema_is_valid_with_no_warning() -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=io.StringIO())


def test_every_client_api_is_described_with_its_request_errors_and_headers(
    client: Client,
) -> None:
    schema = _schema(client)
    for api in CLIENT_APIS:
        assert api.described is not None, api.name
        operation = schema["paths"][api.route]["post"]
        assert operation["tags"] == ["clients"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert "model" in body["required"] and body["additionalProperties"] is True
        ok = operation["responses"]["200"]
        assert set(ok["content"]) == {"application/json", "text/event-stream"}
        assert ok["headers"]["X-OmniRoute-Request-Id"]["required"] is True
        assert "X-OmniRoute-Decision" in ok["headers"]
        error = operation["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]
        assert error == f"#/components/schemas/{api.described.error_shape}"
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert {"X-OmniRoute-Deadline-Ms", "X-OmniRoute-Lease-Owner"} <= headers
        assert {"clientKeyBearer": []} in operation["security"]
        assert {"clientKeyHeader": []} in operation["security"]
    messages = schema["paths"]["/v1/messages"]["post"]
    assert "anthropic-version" in {p["name"] for p in messages["parameters"]}
    anthropic = schema["components"]["schemas"]["AnthropicError"]
    assert anthropic["required"] == ["type", "error"]
    assert schema["paths"]["/v1/models"]["get"]["tags"] == ["clients"]
    assert schema["paths"]["/v1/models/{id}"]["get"]["tags"] == ["clients"]


def test_a_new_client_api_is_described_from_its_declaration(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = dataclasses.replace(CHAT_COMPLETIONS, name="completions", route="/v1/completions")
    monkeypatch.setattr(openapi, "CLIENT_APIS", (*CLIENT_APIS, extra))
    schema = _schema(client)
    assert schema["paths"]["/v1/completions"]["post"]["operationId"] == "v1_completions"


def test_every_operation_has_an_area_tag_and_a_summary(client: Client) -> None:
    schema = _schema(client)
    assert [tag["name"] for tag in schema["tags"]] == list(openapi.AREAS)
    for path, method, operation in _operations(schema):
        assert len(operation["tags"]) == 1, (method, path)
        assert operation["tags"][0] in openapi.AREAS, (method, path)
        assert operation.get("summary"), (method, path)
    summaries = {(p, m): o["summary"] for p, m, o in _operations(schema)}
    assert summaries[("/api/connections/", "get")] == "List provider connections"
    assert summaries[("/api/combos/{id}/", "patch")] == "Change some fields of a combo"
    assert summaries[("/api/error-rules/{id}/", "delete")] == "Delete an error rule"


def test_a_route_no_area_names_keeps_its_tag_and_fails_the_area_check() -> None:
    schema = {"paths": {"/api/unmapped/": {"get": {"tags": ["api"], "operationId": "x_list"}}}}
    tagged = openapi.tag_by_area(schema)
    assert tagged["paths"]["/api/unmapped/"]["get"]["tags"] == ["api"]
    assert tagged["paths"]["/api/unmapped/"]["get"]["summary"] == "List unmapped"
