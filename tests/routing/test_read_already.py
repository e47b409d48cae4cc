"""An upstream answer's body is read from its stream unless the response was built already read
(routing.proxy.upstream.body): a transport's response is never asked for its content, which
would raise and catch ``httpx.ResponseNotRead`` for every answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from routing.proxy.upstream.body import raw_chunks, read_already, read_capped


class Streamed(httpx.AsyncByteStream):
    """A stream of its own, as a transport's response has."""

    def __init__(self, *parts: bytes) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part


@pytest.fixture
def not_read_raised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    raised: list[int] = []
    original = httpx.ResponseNotRead.__init__

    def counted(self: httpx.ResponseNotRead) -> None:
        raised.append(1)
        original(self)

    monkeypatch.setattr(httpx.ResponseNotRead, "__init__", counted)
    return raised


async def test_a_streamed_answer_is_read_from_its_stream_without_asking(
    not_read_raised: list[int],
) -> None:
    body = await read_capped(httpx.Response(200, stream=Streamed(b'{"a":', b"1}")))
    chunks = [c async for c in raw_chunks(httpx.Response(200, stream=Streamed(b"data: x\n\n")))]

    assert body == b'{"a":1}'
    assert chunks == [b"data: x\n\n"]
    assert not_read_raised == []


async def test_an_answer_built_already_read_is_given_whole() -> None:
    built = httpx.Response(200, content=b'{"a":1}')

    assert read_already(built) == b'{"a":1}'
    assert await read_capped(built) == b'{"a":1}'
    assert [c async for c in raw_chunks(built)] == [b'{"a":1}']
    assert [c async for c in raw_chunks(httpx.Response(200, content=b""))] == []


def test_a_byte_stream_given_unread_is_not_read_already() -> None:
    assert read_already(httpx.Response(200, stream=httpx.ByteStream(b"{}"))) is None
