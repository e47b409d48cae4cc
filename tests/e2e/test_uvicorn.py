"""``manage.py serve --server uvicorn``: the same gateway under uvicorn answers its probes and a
streamed chat completion (the official OpenAI SDK as the client). Back-pressure and the stop
under uvicorn are checked with daphne's in test_backpressure.py and test_shutdown.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import content
from tests.e2e.conftest import Gateway, make_route, prepare_gateway, serving

pytestmark = pytest.mark.e2e

CHUNKS, SIZE = 6, 5


@pytest.fixture(scope="module")
def uvicorn_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    env, manage_key = prepare_gateway(tmp_path_factory.mktemp("uvicorn-gateway"))
    with serving(env, manage_key, "--server", "uvicorn") as running:
        yield running


def test_uvicorn_serves_healthz_and_a_streamed_chat(
    uvicorn_gateway: Gateway, fake: FakeUpstream
) -> None:
    assert httpx.get(f"{uvicorn_gateway.url}/healthz").json() == {"status": "alive"}
    route = make_route(uvicorn_gateway, fake, {"chunks": CHUNKS, "chunk_size": SIZE})
    sdk = openai.OpenAI(base_url=f"{uvicorn_gateway.url}/v1", api_key=route.key, max_retries=0)
    messages: Any = [{"role": "user", "content": "x"}]

    chunks = list(sdk.chat.completions.create(model=route.model(), messages=messages, stream=True))

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == content(
        CHUNKS * SIZE
    )
    assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason == "stop"
