"""With debug off, errors outside the admin are JSON in the OpenAI shape and tell nothing of the
gateway's routes, database or settings."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from django.db import DataError, OperationalError
from django.db.backends.utils import CursorWrapper
from django.test import Client
from pytest_django.fixtures import Settings

from routing.services import api_key_create

pytestmark = pytest.mark.django_db

DATABASE_SECRET = "db-password-hunter2"


@pytest.fixture(autouse=True)
def debug_off(settings: Settings) -> None:
    settings.DEBUG = False


@pytest.mark.parametrize(
    "path", ["/api/no-such-area/", "/api/keys/extra/deep/path", "/nowhere", "/static/nope.css"]
)
def test_unknown_url_is_a_json_404_without_a_route_list(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert error["type"] == "invalid_request_error"
    assert path in error["message"]
    body = response.content.decode()
    for route in ("admin/", "api/schema", "session-leases", "readyz", "URLconf"):
        assert route not in body


def test_unknown_object_under_the_api_is_a_json_404() -> None:
    _, key = api_key_create(name="operator", scopes=["manage"])
    response = Client().get("/api/keys/987654/", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_database_outage_is_a_json_503_without_details() -> None:
    _, key = api_key_create(name="operator", scopes=["manage"])
    outage = OperationalError(f'connection to server failed: password "{DATABASE_SECRET}"')
    with patch.object(CursorWrapper, "execute", side_effect=outage):
        response = Client().get("/api/providers/", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": {
            "message": "The gateway's database is unavailable; try again later.",
            "type": "service_unavailable",
            "code": "service_unavailable",
        }
    }
    body = response.content.decode()
    for detail in (DATABASE_SECRET, key, "Traceback", "OperationalError", "SELECT"):
        assert detail not in body


def test_a_value_the_database_refuses_is_a_json_400_without_details() -> None:
    # PostgreSQL raises DataError for a NUL character even in a lookup: it was a 500
    _, key = api_key_create(name="operator", scopes=["manage"])
    refused = DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    with patch.object(CursorWrapper, "execute", side_effect=refused):
        response = Client().get("/api/providers/acme/", HTTP_AUTHORIZATION=f"Bearer {key}")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert "NUL character" in response.json()["error"]["message"]
    for detail in ("DataError", "PostgreSQL", "SELECT", "Traceback"):
        assert detail not in response.content.decode()


@pytest.mark.parametrize("path", ["/api/providers/a%00b/", "/api/providers/?search=a%00b"])
def test_a_nul_character_in_the_url_is_never_a_500(path: str) -> None:
    # found by fuzzing the API on PostgreSQL (a 404 on SQLite, a 400 on PostgreSQL)
    _, key = api_key_create(name="operator", scopes=["manage"])
    response = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {key}")

    assert response.status_code < 500
    assert response["Content-Type"] == "application/json"


def test_outage_while_writing_is_a_json_503_too() -> None:
    _, key = api_key_create(name="operator", scopes=["manage"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    real_execute = CursorWrapper.execute

    def fail_writes(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        if sql.lstrip().upper().startswith("INSERT"):
            raise OperationalError("server closed the connection unexpectedly")
        return real_execute(self, sql, params)

    with patch.object(CursorWrapper, "execute", fail_writes):
        response = client.post(
            "/api/providers/",
            {"slug": "p1", "name": "P1", "category": "api_key", "base_url": "http://u.test/v1"},
            content_type="application/json",
        )
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "service_unavailable"


@pytest.mark.parametrize("depth", [65, 1000, 1100])
@pytest.mark.parametrize("path", ["/api/providers/", "/api/resilience"])
def test_a_deeply_nested_body_is_a_json_400(path: str, depth: int) -> None:
    # 1 000 levels were a RecursionError in DRF's parser: a 500
    _, key = api_key_create(name="operator", scopes=["manage"])
    body = '{"slug": ' + "[" * depth + "]" * depth + "}"
    method = Client().patch if path == "/api/resilience" else Client().post
    response = method(
        path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert "64 levels" in error["message"]


def test_a_body_over_the_upload_limit_is_a_json_413(settings: Settings) -> None:
    # Django's RequestDataTooBig was answered with its HTML 400 page
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    _, key = api_key_create(name="operator", scopes=["manage"])
    body = '{"slug": "' + "x" * 4096 + '"}'
    response = Client().post(
        "/api/providers/", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "request_too_large" and "1024 bytes" in error["message"]


def test_a_huge_path_is_clipped_in_the_404() -> None:
    response = Client().get("/nowhere/" + "p" * 100_000)
    assert response.status_code == 404
    assert len(response.content) < 600
    assert "..." in response.json()["error"]["message"]
