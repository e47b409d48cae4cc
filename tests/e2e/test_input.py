"""Bad input and refused clients get a clear OpenAI-style 4xx, never a 500 or a traceback."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import MAX_BODY_BYTES, Gateway, make_route, records

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-omniroute-request-id"]
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and error["type"]
    assert "Traceback" not in response.text
    return dict(error)


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"", "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "missing_model"),
        (b'{"model": 42, "messages": []}', "missing_model"),
        (b'{"model": "p/m"}', "missing_messages"),
        (b'{"model": "p/m", "messages": "hello"}', "missing_messages"),
        (b'{"model": "p/m", "messages": [{}], "stream": "yes"}', "invalid_stream"),
    ],
)
def test_malformed_requests_are_400(
    gateway: Gateway, fake: FakeUpstream, content: bytes, code: str
) -> None:
    route = make_route(gateway, fake)
    with gateway.client(route.key) as client:
        response = client.post("/chat/completions", content=content)
    assert_error(response, 400, code)
    assert records(fake, route) == []


def test_a_body_over_the_limit_is_413(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    big = {"model": route.model(), "messages": [{"role": "user", "content": "x" * MAX_BODY_BYTES}]}
    with gateway.client(route.key) as client:
        assert_error(client.post("/chat/completions", json=big), 413, "request_too_large")
    assert records(fake, route) == []


@pytest.mark.parametrize(("method", "path"), [("GET", "/chat/completions"), ("POST", "/models")])
def test_a_wrong_method_is_405(gateway: Gateway, method: str, path: str) -> None:
    with gateway.client("irrelevant") as client:
        response = client.request(method, path)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"]


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "missing_api_key"),
        ({"authorization": "Bearer sk-omr-not-a-key"}, "invalid_api_key"),
        ({"x-api-key": "sk-omr-not-a-key"}, "invalid_api_key"),
        ({"authorization": "Basic dXNlcjpwYXNz"}, "missing_api_key"),
    ],
)
def test_clients_without_a_valid_key_are_401(
    gateway: Gateway, headers: dict[str, str], code: str
) -> None:
    body = {"model": "mock/demo-model", "messages": MESSAGES}
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json=body, headers=headers)
    assert_error(response, 401, code)


def test_x_api_key_is_accepted(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    body = {"model": route.model(), "messages": MESSAGES}
    headers = {"x-api-key": route.key}
    assert httpx.post(f"{gateway.url}/v1/chat/completions", json=body, headers=headers).is_success


def test_a_revoked_key_is_refused_at_once(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    key_id = next(
        k["id"]
        for k in gateway.api.get("/api/keys/", params={"search": route.key[:12]}).json()["results"]
        if k["prefix"] == route.key[:12]
    )
    assert gateway.api.post(f"/api/keys/{key_id}/revoke/").is_success
    with gateway.client(route.key) as client:
        response = client.post(
            "/chat/completions", json={"model": route.model(), "messages": MESSAGES}
        )
    assert_error(response, 401, "invalid_api_key")


def test_unknown_models_are_404(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, models=[])
    with gateway.client(route.key) as client:
        for model in ("no-such-combo", "no-such-provider/model", f"{route.provider}/"):
            response = client.post("/chat/completions", json={"model": model, "messages": MESSAGES})
            assert_error(response, 404, "model_not_found")


def test_a_model_the_key_may_not_use_is_403(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, models=["someone-else/*"])
    with gateway.client(route.key) as client:
        response = client.post(
            "/chat/completions", json={"model": route.model(), "messages": MESSAGES}
        )
    assert_error(response, 403, "model_not_allowed")
    assert records(fake, route) == []


def test_the_management_api_refuses_keys_without_manage(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    headers = {"authorization": f"Bearer {route.key}"}
    for path in ("/api/providers/", "/api/connections/", "/api/keys/", "/api/combos/"):
        assert httpx.get(f"{gateway.url}{path}", headers=headers).status_code == 403
        assert httpx.get(f"{gateway.url}{path}").status_code == 401


def test_no_api_response_contains_a_connection_secret(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    secret = "sk-upstream-e2e-SECRET-0123456789"
    paths = ["/api/connections/", f"/api/connections/{route.connections[0]}/", "/api/schema/"]
    for path in paths:
        response = gateway.api.get(path)
        assert response.is_success and secret not in response.text
    patched = gateway.api.patch(
        f"/api/connections/{route.connections[0]}/", json={"secret": secret + "x"}
    )
    assert patched.is_success and secret not in patched.text
