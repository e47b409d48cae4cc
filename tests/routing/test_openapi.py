"""The OpenAPI schema documents the error answers every operation can give, in the one error
shape, and what a request body must hold."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

ERROR_REF = {"$ref": "#/components/schemas/Error"}


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock(), override_settings(PUBLIC_API_DOCS=True):
        response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def statuses(schema: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    responses: dict[str, Any] = schema["paths"][path][method]["responses"]
    return responses


def test_a_detail_operation_documents_404_and_the_credential_errors(schema: dict) -> None:
    found = statuses(schema, "/api/connections/{id}/", "get")

    assert {"200", "401", "403", "404"} <= set(found)
    assert found["404"]["content"]["application/json"]["schema"] == ERROR_REF
    assert "400" not in found  # no body, no query, a number in the path: nothing to be invalid
    assert "400" in statuses(schema, "/api/providers/{slug}/", "get")  # a text value may be


def test_an_operation_with_a_body_documents_400(schema: dict) -> None:
    found = statuses(schema, "/api/keys/", "post")

    assert found["400"]["content"]["application/json"]["schema"] == ERROR_REF
    assert "404" not in found


def test_an_anonymous_probe_documents_no_credential_errors(schema: dict) -> None:
    found = statuses(schema, "/readyz", "get")

    assert "401" not in found and "403" not in found


def test_a_status_a_view_documents_keeps_its_words_and_gains_the_error_body(schema: dict) -> None:
    found = statuses(schema, "/api/v1/session-leases", "post")

    assert {"400", "401", "403", "409", "415", "429", "503"} <= set(found)
    assert found["503"]["description"].startswith("The model does not resolve")
    assert found["503"]["content"]["application/json"]["schema"] == ERROR_REF


def test_the_error_shape_and_the_request_bodies(schema: dict) -> None:
    components = schema["components"]["schemas"]

    assert components["Error"]["properties"]["error"]["required"] == ["message", "type", "code"]
    assert components["ClientApiKeyRequest"]["properties"]["name"]["minLength"] == 1
    lease_body = schema["paths"]["/api/v1/session-leases"]["post"]["requestBody"]
    actions = lease_body["content"]["application/json"]["schema"]["oneOf"]
    assert [a["required"] for a in actions] == [
        ["action", "model"],
        *[["action", "generation"]] * 2,
    ]
