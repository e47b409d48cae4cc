"""Exclusive session leases across gateway processes: two
gateway processes share one database (SQLite here, PostgreSQL in the CI's second pass), and
twenty owners racing for a one-connection pool through both of them get exactly one lease.
Then the winner's lease serves inference on either process, and the raw owner token is
nowhere in what the upstream received."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, prepare_gateway, records, serving

pytestmark = pytest.mark.e2e

RACERS = 20
OWNER = "x-omniroute-lease-owner"
GENERATION = "x-omniroute-lease-generation"


def owner() -> str:
    return "vlo_" + secrets.token_urlsafe(32)  # 43 base64url characters


def acquire(gateway: Gateway, key: str, model: str, who: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/api/v1/session-leases",
        json={"action": "acquire", "model": model},
        headers={"authorization": f"Bearer {key}", OWNER: who},
        timeout=30,
    )


def test_twenty_owners_racing_through_two_processes_get_one_lease(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    env, manage_key = prepare_gateway(tmp_path)
    with serving(env, manage_key) as first:
        route = make_route(first, fake)
        managed = first.post(
            "/api/keys/",
            {
                "name": "agent",
                "scopes": ["lease:exclusive"],
                "allowed_connections": route.connections,
                "allowed_models": [f"{route.provider}/*"],
            },
        )["key"]
        model = route.model("m")
        with serving(env, manage_key) as second:  # it reads the configuration made above
            owners = [owner() for _ in range(RACERS)]
            gateways = [first, second] * (RACERS // 2)
            with ThreadPoolExecutor(RACERS) as pool:
                answers = list(
                    pool.map(
                        lambda pair: acquire(*pair),
                        [
                            (gw, managed, model, who)
                            for gw, who in zip(gateways, owners, strict=True)
                        ],
                    )
                )

            statuses = sorted(a.status_code for a in answers)
            assert statuses == [200] + [429] * (RACERS - 1), [a.text for a in answers]
            winner = next(owners[n] for n, a in enumerate(answers) if a.status_code == 200)
            granted = next(a.json() for a in answers if a.status_code == 200)
            assert granted["state"] == "ACTIVE" and granted["generation"] == 1
            refused = next(a for a in answers if a.status_code == 429)
            assert refused.json()["error"]["code"] == "LEASE_CAPACITY_UNAVAILABLE"
            assert int(refused.headers["retry-after"]) >= 1

            for gateway in (first, second):  # the lease serves inference on either process
                with gateway.client(managed) as client:
                    answer = client.post(
                        "/chat/completions",
                        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
                        headers={OWNER: winner, GENERATION: "1"},
                    )
                assert answer.status_code == 200, answer.text

    seen = records(fake, route)
    assert len(seen) == 2
    assert winner not in repr(seen)  # the raw token never reached the upstream
