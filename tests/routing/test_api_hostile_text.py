"""What the management API reads from a body or a query string, refused as the client's 400
in the API's shape: a lone surrogate anywhere in a JSON body (no answer could repeat it, no
row holding it could be read back), an object where a list of ids belongs, a search longer
than any name a list holds (docs/operating.md, "The management API")."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from routing.models import ClientApiKey, ProviderConnection
from routing.services import api_key_create

pytestmark = pytest.mark.django_db

LONE = "\\ud800"  # JSON's escape, as a client writes it


def _send(client: APIClient, method: str, url: str, raw: str) -> Any:
    return getattr(client, method)(url, raw, content_type="application/json")


@pytest.mark.parametrize(
    ("method", "url", "raw"),
    [
        ("post", "/api/providers/", '{"slug": "x", "category": "' + LONE + '"}'),
        (
            "post",
            "/api/connections/",
            '{"provider": "mock", "name": "c", "extras": {"a": "' + LONE + '"}}',
        ),
        (
            "post",
            "/api/connections/",
            '{"provider": "mock", "name": "c", "extras": {"' + LONE + '": 1}}',
        ),
        ("patch", "/api/resilience", '{"' + LONE + '": 1}'),
        ("put", "/api/config", '{"' + LONE + '": 1}'),
        ("post", "/api/keys/", '{"name": "k", "scopes": ["' + LONE + '"]}'),
    ],
    ids=["choice echoed", "extras value", "extras key", "settings key", "config key", "scopes"],
)
def test_a_lone_surrogate_in_a_body_is_a_400_and_nothing_is_stored(
    manage_client: APIClient, provider: Any, method: str, url: str, raw: str
) -> None:
    # Each was a 500: the error repeating it, or the 201 showing it, could not be encoded
    response = _send(manage_client, method, url, raw)

    assert response.status_code == 400
    assert "lone surrogate" in response.json()["error"]["message"]
    assert not ProviderConnection.objects.filter(name="c").exists()
    assert manage_client.get("/api/connections/").status_code == 200


def test_extras_holding_a_nul_are_refused_on_the_field(
    manage_client: APIClient, provider: Any
) -> None:
    # PostgreSQL's jsonb refuses \u0000: stored, the write itself failed there
    raw = '{"provider": "mock", "name": "c", "extras": {"a": "b\\u0000c"}}'

    response = _send(manage_client, "post", "/api/connections/", raw)

    assert response.status_code == 400
    assert "extras" in response.json()["error"]["fields"]


@pytest.mark.parametrize("given", [{}, {"5": True}], ids=["empty object", "object"])
def test_allowed_connections_takes_a_list_not_an_object(
    manage_client: APIClient, connection: ProviderConnection, given: dict[str, Any]
) -> None:
    key, _ = api_key_create(name="limited", allowed_connections=[connection])

    response = manage_client.patch(
        f"/api/keys/{key.pk}/", {"allowed_connections": given}, format="json"
    )

    assert response.status_code == 400  # {} cleared the restriction, {"5": true} set [5]
    assert "allowed_connections" in response.json()["error"]["fields"]
    assert list(ClientApiKey.objects.get(pk=key.pk).allowed_connections.all()) == [connection]


@pytest.mark.parametrize("url", ["/api/providers/", "/api/connections/", "/api/error-rules/"])
def test_a_search_longer_than_any_name_is_a_400_not_an_outage(
    manage_client: APIClient, provider: Any, url: str
) -> None:
    # SQLite refused the LIKE pattern, and the refusal read as the database being down (503)
    response = manage_client.get(url, {"search": "_" * 30_000})

    assert response.status_code == 400
    assert "search" in response.json()["error"]["fields"]
    assert manage_client.get(url, {"search": "_" * 1000}).status_code == 200
