"""With debug on (``make run``), an unknown URL under ``/api/`` or ``/v1/`` is still a JSON 404
without a route list; the admin keeps Django's own pages (issue 14, "Safe defaults")."""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator
from django.test import Client
from pytest_django.fixtures import Settings

from omniroute.asgi import application
from omniroute.views import api_area_names

ROUTE_WORDS = ("admin/", "api/schema", "session-leases", "readyz", "URLconf", "<html")


@pytest.fixture(autouse=True)
def debug_on(settings: Settings) -> None:
    settings.DEBUG = True


def assert_json_404(status: int, content_type: str, body: bytes) -> None:
    assert status == 404
    assert content_type.startswith("application/json")
    error = json.loads(body)["error"]
    assert error["code"] == "not_found"
    assert error["type"] == "invalid_request_error"
    text = body.decode()
    for word in ROUTE_WORDS:
        assert word not in text


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/api/no-such-area/", "/api/no-such-area", "/api/keys/extra/deep/path", "/api/v1/x"]
)
def test_unknown_api_url_is_a_json_404_with_debug_on(client: Client, path: str) -> None:
    response = client.get(path)
    assert_json_404(response.status_code, response["Content-Type"], response.content)
    assert path in response.json()["error"]["message"]


@pytest.mark.django_db
def test_other_methods_get_the_same_json_404() -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/no-such-area/", {}, content_type="application/json")
    assert_json_404(response.status_code, response["Content-Type"], response.content)


@pytest.mark.django_db
def test_known_api_routes_still_answer(client: Client) -> None:
    assert client.get("/api/").status_code == 200
    assert client.get("/api/providers/").status_code in (401, 403)  # not a 404
    assert client.get("/api/schema/").status_code == 200


def test_the_catch_all_is_not_listed_as_an_api_area() -> None:
    assert all(name for name in api_area_names())
    assert "api-root" not in api_area_names()


@pytest.mark.django_db
def test_admin_keeps_djangos_pages(admin_client: Client) -> None:
    response = admin_client.get("/admin/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.django_db(transaction=True)
async def test_unknown_v1_url_is_a_json_404_with_debug_on() -> None:
    communicator = HttpCommunicator(application, "GET", "/v1/no-such-endpoint")
    reply = await communicator.get_response()
    headers = {name.decode().lower(): value.decode() for name, value in reply["headers"]}
    assert_json_404(reply["status"], headers["content-type"], reply["body"])
