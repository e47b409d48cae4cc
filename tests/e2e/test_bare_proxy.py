"""The bench's bare proxy (its ceiling row) relays what the upstream sends, byte for byte: a
plain answer and a stream, through a real daphne process on 127.0.0.1.

The fake upstream numbers its answers (``chatcmpl-fake-<n>``), so two answers to the same
request differ in that id only; it is blanked before comparing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping

import httpx
import pytest

from omniroute.tools.bench.bare_server import bare_proxy
from omniroute.tools.fakeupstream import FakeUpstream
from tests.conftest import free_port

pytestmark = pytest.mark.e2e

ANSWER_ID = re.compile(rb"chatcmpl-fake-\d{12}")
STREAM_KNOBS = {"chunks": 7, "chunk_interval_ms": 1}  # one write per event


@pytest.fixture(scope="module")
def bare(fake: FakeUpstream) -> Iterator[str]:
    """The bare proxy in front of the fake upstream; its base URL."""
    port = free_port()
    with bare_proxy(dict(os.environ), port, fake.url):
        yield f"http://127.0.0.1:{port}"


def answer(base_url: str, path: str, body: Mapping[str, object]) -> tuple[int, str, bytes]:
    """Status, content type and the body as it arrived, its answer id blanked."""
    with httpx.stream("POST", f"{base_url}{path}", json=body, timeout=10) as response:
        raw = b"".join(response.iter_raw())
    return response.status_code, response.headers["content-type"], ANSWER_ID.sub(b"ID", raw)


def test_a_plain_answer_comes_back_as_the_upstream_sent_it(fake: FakeUpstream, bare: str) -> None:
    body = {"model": "bare-plain", "messages": [{"role": "user", "content": "hi"}]}
    path = "/v1/chat/completions"

    status, content_type, relayed = answer(bare, path, body)

    assert (status, content_type, relayed) == answer(fake.url, path, body)
    assert relayed.startswith(b'{"id":"ID","object":"chat.completion"')


def test_a_stream_comes_back_as_the_upstream_sent_it(fake: FakeUpstream, bare: str) -> None:
    body = {"model": "bare-stream", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    path = fake.base_url(**STREAM_KNOBS).removeprefix(fake.url) + "/chat/completions"

    status, content_type, relayed = answer(bare, path, body)

    assert (status, content_type, relayed) == answer(fake.url, path, body)
    assert status == 200 and content_type.startswith("text/event-stream")
    events = relayed.split(b"\n\n")  # the content, the finish event, [DONE], b"" after it
    assert len(events) == STREAM_KNOBS["chunks"] + 3
    assert events[-2:] == [b"data: [DONE]", b""]
