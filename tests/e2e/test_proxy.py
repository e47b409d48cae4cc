"""The proxy through real HTTP: the official openai SDK and raw HTTP, streaming and not."""

from __future__ import annotations

import openai
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import UPSTREAM_SECRET, Gateway, make_route, records

pytestmark = pytest.mark.e2e


def sdk(gateway: Gateway, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0, timeout=10)


def test_openai_sdk_non_streaming(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    raw = sdk(gateway, route.key).chat.completions.with_raw_response.create(
        model=route.model(), messages=[{"role": "user", "content": "hi"}]
    )
    completion = raw.parse()
    assert (completion.choices[0].message.content or "").startswith("The quick brown fox")
    assert raw.headers["x-omniroute-request-id"]
    decision = raw.headers["x-omniroute-decision"]
    assert f"provider={route.provider}" in decision and "strategy=single" in decision
    (seen,) = records(fake, route)
    assert seen.body["model"] == "gpt-test"
    assert seen.headers["authorization"] == f"Bearer {UPSTREAM_SECRET}"


def test_openai_sdk_streaming(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    stream = sdk(gateway, route.key).chat.completions.create(
        model=route.model(), messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) == 20
    complete = sdk(gateway, route.key).chat.completions.create(
        model=route.model(), messages=[{"role": "user", "content": "hi"}]
    )
    assert "".join(pieces) == complete.choices[0].message.content


def test_chunks_are_relayed_as_they_arrive(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake, {"chunks": 5, "chunk_interval_ms": 150})
    body = {"model": route.model(), "stream": True, "messages": [{"role": "user", "content": "x"}]}
    with (
        gateway.client(route.key) as client,
        client.stream("POST", "/chat/completions", json=body) as r,
    ):
        assert r.status_code == 200
        first = next(r.iter_raw())
        # The first event arrives while the upstream is still producing the rest.
        assert b"chat.completion.chunk" in first
        assert records(fake, route)[0].chunks_sent < 5


def test_client_credentials_and_session_headers_never_reach_upstream(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    private = {
        "x-api-key": route.key,
        "x-session-id": "session-1",
        "x-codex-session-id": "session-2",
        "x-omniroute-session": "session-3",
        "x-omniroute-lease-owner": "vlo_" + "a" * 43,
        "x-omniroute-lease-generation": "1",
        "cookie": "sessionid=abc",
    }
    body = {"model": route.model(), "messages": [{"role": "user", "content": "x"}]}
    with gateway.client(route.key) as client:
        assert client.post("/chat/completions", json=body, headers=private).status_code == 200
    (seen,) = records(fake, route)
    assert not set(private) & set(seen.headers)
    assert route.key not in " ".join(seen.headers.values())


def test_combo_routes_across_providers_in_order(gateway: Gateway, fake: FakeUpstream) -> None:
    failing = make_route(gateway, fake, {"status": 503})
    healthy = make_route(gateway, fake)
    name = f"combo-{failing.provider}"
    gateway.post(
        "/api/combos/",
        {
            "name": name,
            "strategy": "priority",
            "targets": [
                {"provider": failing.provider, "model": "m1"},
                {"provider": healthy.provider, "model": "m2"},
            ],
        },
    )
    key = gateway.post("/api/keys/", {"name": f"{name}-key", "allowed_models": [name]})["key"]
    with gateway.client(key) as client:
        response = client.post(
            "/chat/completions",
            json={"model": name, "messages": [{"role": "user", "content": "x"}]},
        )
    assert response.status_code == 200
    assert f"provider={healthy.provider}" in response.headers["x-omniroute-decision"]
    assert "strategy=priority" in response.headers["x-omniroute-decision"]
    assert [r.body["model"] for r in records(fake, failing)] == ["m1", "m1"]  # one retry
    assert [r.body["model"] for r in records(fake, healthy)] == ["m2"]


def test_models_lists_combos_and_served_models_the_key_may_use(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    gateway.api.patch(
        f"/api/connections/{route.connections[0]}/", json={"served_models": ["a", "b"]}
    )
    with gateway.client(route.key) as client:
        ids = [m["id"] for m in client.get("/models").json()["data"]]
    assert f"{route.provider}/a" in ids and f"{route.provider}/b" in ids
    assert all(i.startswith(f"{route.provider}/") for i in ids)
