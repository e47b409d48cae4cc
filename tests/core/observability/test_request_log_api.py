"""``/api/requests/``: the request log, paged, filtered and searched like the configuration
collections, one request by its id; the management API's ``manage`` scope guards it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from omniroute.core.observability.requestlog.record import RequestRecord, StepKind, TrailStep
from omniroute.core.observability.requestlog.services import request_log_write
from routing.domain.config.vocabulary import Scope
from routing.services import api_key_create

pytestmark = pytest.mark.django_db

URL = "/api/requests/"
NOON = datetime(2026, 12, 6, 12, 0, tzinfo=UTC).timestamp()
TRAIL = (
    TrailStep(StepKind.TRIED, "acme/m", 1, "http_error", 503, 12, "HTTP 503"),
    TrailStep(StepKind.TRIED, "acme/m", 2, "success", 200, 30),
)


@pytest.fixture
def logged() -> None:
    request_log_write(
        records=[
            RequestRecord(
                f"req-{i}",
                NOON + i * 60,
                "/v1/chat/completions",
                (200, 503)[i % 2],
                10,
                key_name=("alpha", "bravo")[i % 2],
                key_prefix="sk-or-ab",
                model="acme/m",
                provider="acme",
                trail=TRAIL,
            )
            for i in range(6)
        ]
    )


def _ids(response: Any) -> list[str]:
    return [row["request_id"] for row in response.json()["results"]]


def test_the_list_is_paged_newest_first(admin_client: Client, logged: None) -> None:
    response = admin_client.get(URL, {"limit": 2, "offset": 1})

    assert response.status_code == 200
    assert response.json()["count"] == 6
    assert _ids(response) == ["req-4", "req-3"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"key": "alpha"}, ["req-4", "req-2", "req-0"]),
        ({"status": "503", "key": "bravo"}, ["req-5", "req-3", "req-1"]),
        ({"provider": "other"}, []),
        ({"model": "acme/m", "since": "2026-12-06T12:03:00Z"}, ["req-5", "req-4", "req-3"]),
        ({"until": "2026-12-06T12:01:00+00:00"}, ["req-0"]),
        ({"search": "req-2"}, ["req-2"]),
    ],
)
def test_the_list_filters_by_the_admins_fields(
    admin_client: Client, logged: None, query: dict[str, str], expected: list[str]
) -> None:
    response = admin_client.get(URL, query)

    assert response.status_code == 200
    assert _ids(response) == expected


def test_a_time_without_offset_is_a_400(admin_client: Client, logged: None) -> None:
    assert admin_client.get(URL, {"since": "yesterday"}).status_code == 400
    assert admin_client.get(URL, {"since": "2026-12-06T12:00:00"}).status_code == 400


@pytest.mark.parametrize(
    "when",
    [
        "2024-02-30T00:00:00Z",  # no such day
        "2024-01-01T25:00:00Z",  # no such hour
        "9999-12-31T23:00:00-05:00",  # past the last UTC day
        "0001-01-01T00:00:00+05:00",  # before the first
    ],
)
@pytest.mark.parametrize("name", ["since", "until"])
def test_an_impossible_time_is_a_400_naming_it(
    admin_client: Client, logged: None, name: str, when: str
) -> None:
    response = admin_client.get(URL, {name: when})

    assert response.status_code == 400
    assert name in response.json()["error"]["fields"]


def test_one_request_by_its_id_with_its_trail(admin_client: Client, logged: None) -> None:
    response = admin_client.get(f"{URL}req-3/")

    assert response.status_code == 200
    body = response.json()
    assert body["key_name"] == "bravo" and body["status"] == 503
    assert body["trail"] == [step.as_json() for step in TRAIL]
    assert admin_client.get(f"{URL}req-99/").status_code == 404


def test_the_log_is_read_only(admin_client: Client, logged: None) -> None:
    assert admin_client.delete(f"{URL}req-3/").status_code == 405
    assert admin_client.post(URL, {}).status_code == 405


@pytest.mark.parametrize(("scopes", "status"), [([Scope.MANAGE], 200), ([], 403)])
def test_a_client_key_needs_the_manage_scope(logged: None, scopes: list[str], status: int) -> None:
    _, plaintext = api_key_create(name="operator", scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    assert client.get(URL).status_code == status
    assert APIClient().get(URL).status_code in (401, 403)
