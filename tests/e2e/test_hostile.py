"""Hostile input over real HTTP, one test per way it used to break: deep nesting, huge or
header-breaking model names, oversized headers, an oversized management body, unknown sockets,
``/v1/messages/...`` paths, encoded secrets in upstream errors, and the private API docs.
(The dashboard socket's port rule is tested in tests/web/test_dashboard.py; the corpus of
bad input is tests/e2e/test_bad_input_corpus.py.)"""

from __future__ import annotations

import base64
import secrets
import socket
from urllib.parse import urlsplit

import anthropic
import httpx
import orjson
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, records
from tests.e2e.hostile_support import (
    ANSWER_SECONDS,
    MESSAGES,
    OPENAI,
    SURFACES,
    Surface,
    assert_wire_error,
    timed,
)

pytestmark = pytest.mark.e2e


def surface_route(gateway: Gateway, fake: FakeUpstream, surface: Surface) -> Route:
    return make_route(gateway, fake, wire_format=surface.wire_format)


def nested_body(surface: Surface, model: str, depth: int) -> bytes:
    deep = "[" * depth + "]" * depth
    return surface_body_with(surface, model, '"metadata": ' + deep)


def surface_body_with(surface: Surface, model: str, member: str) -> bytes:
    plain = orjson.dumps(surface.body(model)).decode()
    return (plain[:-1] + ", " + member + "}").encode()


@pytest.mark.parametrize("depth", [65, 253, 300, 1020, 1100])
@pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])
def test_deep_json_on_v1_is_a_400_in_the_endpoint_shape(
    gateway: Gateway, fake: FakeUpstream, surface: Surface, depth: int
) -> None:
    route = surface_route(gateway, fake, surface)
    with gateway.client(route.key) as client:
        response, seconds = timed(
            client.post,
            surface.path.removeprefix("/v1"),
            content=nested_body(surface, route.model(), depth),
        )
    error = assert_wire_error(response, 400, surface.wire_format)
    assert error["type"] == "invalid_request_error"
    assert records(fake, route, path=surface.upstream_path) == []
    assert seconds < ANSWER_SECONDS


@pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])
def test_json_at_the_limit_is_served(
    gateway: Gateway, fake: FakeUpstream, surface: Surface
) -> None:
    route = surface_route(gateway, fake, surface)
    with gateway.client(route.key) as client:
        # the body object is level 1, "metadata" adds 63 more: 64 in all
        response = client.post(
            surface.path.removeprefix("/v1"), content=nested_body(surface, route.model(), 63)
        )
    assert response.status_code == 200, response.text
    assert len(records(fake, route, path=surface.upstream_path)) == 1


@pytest.mark.parametrize("depth", [65, 1000])
def test_deep_json_on_the_management_api_is_a_json_400(gateway: Gateway, depth: int) -> None:
    body = '{"slug": "deep", "name": ' + "[" * depth + "]" * depth + "}"
    response = gateway.api.post("/api/providers/", content=body, headers=JSON_TYPE)
    error = assert_wire_error(response, 400, OPENAI)
    assert error["code"] == "invalid_request"


JSON_TYPE = {"content-type": "application/json"}
HUGE = 60_000  # under the e2e gateway's 64 KiB body limit


def test_a_huge_model_name_is_clipped_in_the_404(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    with gateway.client(route.key) as client:
        body = {"model": "m" * HUGE, "messages": MESSAGES}
        response = client.post("/chat/completions", json=body)
        listed = client.get("/models/" + "m" * 8000)
    for answer in (response, listed):
        error = assert_wire_error(answer, 404, OPENAI)
        assert len(error["message"]) < 400 and "..." in error["message"]
        assert len(answer.content) < 1000


def test_a_huge_served_model_name_stays_out_of_the_headers(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    with gateway.client(route.key) as client:
        response = client.post(
            "/chat/completions", json={"model": route.model("m" * HUGE), "messages": MESSAGES}
        )
    assert response.status_code == 200, response.text[:300]
    assert sum(len(k) + len(v) for k, v in response.headers.items()) < 2000
    assert "..." in response.headers["x-omniroute-decision"]


def test_a_model_name_cannot_write_a_header(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    model = route.model("x\r\nx-injected: 1\r\n\r\n<html>\u2603")
    with gateway.client(route.key) as client:
        response = client.post("/chat/completions", json={"model": model, "messages": MESSAGES})
    assert response.status_code == 200, response.text[:300]
    assert "x-injected" not in response.headers
    decision = response.headers["x-omniroute-decision"]
    assert "\\x0d\\x0ax-injected: 1" in decision and "\\u2603" in decision


@pytest.mark.parametrize(
    ("path", "wire_format"),
    [("/v1/chat/completions", OPENAI), ("/v1/messages", "anthropic"), ("/api/providers/", OPENAI)],
)
@pytest.mark.parametrize(
    "headers",
    [{f"x-h{i}": "v" for i in range(150)}, {"x-big": "b" * 12_000}],
    ids=["150 headers", "12 KiB header"],
)
def test_too_many_or_too_large_headers_are_a_json_431(
    gateway: Gateway, path: str, wire_format: str, headers: dict[str, str]
) -> None:
    response, seconds = timed(httpx.post, f"{gateway.url}{path}", json={}, headers=headers)
    error = assert_wire_error(response, 431, wire_format)
    assert "headers" in error["message"]
    assert seconds < ANSWER_SECONDS


def test_past_the_servers_own_limits_the_connection_is_refused_promptly(gateway: Gateway) -> None:
    # daphne's parser: a header line over 16 KiB closes the connection, no application answer
    # (docs/deploying.md); the test only holds it to answering at once
    address = urlsplit(gateway.url)
    request = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n"
    assert address.port is not None
    with socket.create_connection((address.hostname, address.port), timeout=5) as raw:
        raw.sendall(request)
        answer = raw.recv(65536)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400")


def test_a_management_body_over_the_upload_limit_is_a_json_413(gateway: Gateway) -> None:
    body = '{"slug": "big", "name": "' + "x" * (3 * 1024 * 1024) + '"}'
    response = gateway.api.post("/api/providers/", content=body, headers=JSON_TYPE)
    error = assert_wire_error(response, 413, OPENAI)
    assert error["code"] == "request_too_large"


@pytest.mark.parametrize("path", ["/ws/other/", "/ws/dashboard/x/", "/v1/chat/completions"])
def test_a_socket_to_an_unknown_path_is_refused_not_a_500(gateway: Gateway, path: str) -> None:
    url = gateway.url.replace("http://", "ws://") + path
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers={"Origin": gateway.url}, open_timeout=5)
    assert refused.value.response.status_code == 403


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/messages/count_tokens", 404),
        ("POST", "/v1/messages/batches", 404),
        ("GET", "/v1/messages/msg_123/extra", 404),
        ("GET", "/v1/messages", 405),
    ],
)
def test_every_messages_path_answers_in_anthropic_shape(
    gateway: Gateway, fake: FakeUpstream, method: str, path: str, status: int
) -> None:
    route = make_route(gateway, fake, wire_format="anthropic")
    headers = {"x-api-key": route.key, "anthropic-version": "2023-06-01"}
    response = httpx.request(method, f"{gateway.url}{path}", json={}, headers=headers)
    error = assert_wire_error(response, status, "anthropic")
    if status == 404:
        assert error["type"] == "not_found_error"


def test_the_anthropic_sdk_reads_the_count_tokens_refusal(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake, wire_format="anthropic")
    sdk = anthropic.Anthropic(base_url=gateway.url, api_key=route.key, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as refused:
        sdk.messages.count_tokens(model=route.model(), messages=[{"role": "user", "content": "x"}])
    assert "count_tokens" in refused.value.message
    assert refused.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


OWN_SECRET = "e2e-own-credential-0123456789"
ENCODED = {
    "base64": base64.b64encode(OWN_SECRET.encode()).decode(),
    "basic credential": base64.b64encode(f"user:{OWN_SECRET}".encode()).decode(),
    "hex": OWN_SECRET.encode().hex(),
    "url-encoded": OWN_SECRET.replace("-", "%2D"),
    "split by a space": OWN_SECRET[:10] + " " + OWN_SECRET[10:],
    "quoted": '"' + OWN_SECRET[:10] + '" "' + OWN_SECRET[10:] + '"',
}


@pytest.mark.parametrize("encoding", list(ENCODED))
def test_an_upstream_echoing_the_encoded_secret_is_scrubbed(
    gateway: Gateway, fake: FakeUpstream, encoding: str
) -> None:
    echoed = ENCODED[encoding]
    slug = f"e2e-{secrets.token_hex(4)}"
    gateway.post(
        "/api/providers/",
        {"slug": slug, "name": slug, "category": "api_key", "base_url": fake.base_url()},
    )
    gateway.post(
        "/api/connections/", {"provider": slug, "name": "only", "priority": 1, "secret": OWN_SECRET}
    )
    key = gateway.post("/api/keys/", {"name": f"{slug}-client", "allowed_models": [f"{slug}/*"]})
    model = f"leak-{secrets.token_hex(4)}"
    leak = f'{{"error": {{"message": "bad credential {echoed}", "type": "invalid_request_error"}}}}'
    fake.set_model(model, status=400, body=leak)
    try:
        with gateway.client(key["key"]) as client:
            response = client.post(
                "/chat/completions", json={"model": f"{slug}/{model}", "messages": MESSAGES}
            )
    finally:
        fake.set_model(model)
    assert response.status_code == 400
    assert echoed not in response.text and OWN_SECRET not in response.text
    assert "[redacted]" in response.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/api/", "/api/schema/", "/api/docs/"])
def test_the_management_surface_is_not_described_to_strangers(gateway: Gateway, path: str) -> None:
    assert httpx.get(f"{gateway.url}{path}").status_code == 401
    assert gateway.api.get(path).status_code == 200
