"""The API docs page (Swagger UI from local assets), the schema, and the ``/api/`` root."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db

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
