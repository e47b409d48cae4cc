"""What losing the database does to a running gateway (docs/deploying.md, "Across hosts"):
the network to PostgreSQL is cut under a serving gateway, then restored.

While it is cut, `/v1` keeps answering from the configuration the process loaded (client keys,
combos and connections live in its snapshot), the management API answers a JSON 503
`service_unavailable` and `/readyz` says not ready; once the link is back everything answers
again without a restart. The gateway gets a PostgreSQL database of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, make_route, prepare_gateway, serving
from tests.e2e.cuttable_link import CuttableLink, cuttable_link

pytestmark = pytest.mark.e2e

POSTGRES = os.environ.get("CI_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
WAIT_SECONDS = 15


@pytest.fixture
def link() -> Iterator[CuttableLink]:
    server = urlsplit(POSTGRES)
    with cuttable_link(server.hostname or "127.0.0.1", server.port or 5432) as running:
        yield running


def _through(link: CuttableLink, url: str) -> str:
    """``url`` with the link's address in place of the server's."""
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    return parts._replace(netloc=f"{auth}@127.0.0.1:{link.port}").geturl()


def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.1)


def _chat(gateway: Gateway, key: str, model: str) -> httpx.Response:
    with gateway.client(key) as client:
        return client.post(
            "/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        )


def test_a_lost_database_leaves_v1_serving_and_management_answering_503(
    tmp_path: Path, fake: FakeUpstream, link: CuttableLink
) -> None:
    # Made (and dropped at the end) on the server itself; the gateway reaches it by the link.
    env, manage_key = prepare_gateway(tmp_path, DATABASE_URL=POSTGRES)
    env["DATABASE_URL"] = _through(link, env["DATABASE_URL"])
    with serving(env, manage_key) as gateway:
        route = make_route(gateway, fake)
        assert _chat(gateway, route.key, route.model()).status_code == 200

        link.cut()

        answer = _chat(gateway, route.key, route.model())
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"]
        management = gateway.api.get("/api/providers/")
        assert management.status_code == 503, management.text
        assert management.json()["error"]["code"] == "service_unavailable"
        assert httpx.get(f"{gateway.url}/readyz").status_code == 503

        link.restore()

        _until(lambda: gateway.api.get("/api/providers/").status_code == 200)
        _until(lambda: httpx.get(f"{gateway.url}/readyz").status_code == 200)
        assert _chat(gateway, route.key, route.model()).status_code == 200
