"""Reading an upstream's answer body (``routing.proxy.upstream.client``): capped, and judged before
it is
trusted: a plain answer must be one JSON object within ``MAX_UPSTREAM_BODY_BYTES``, a stream
must start like server-sent events, and an error body is read only so far."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from django.conf import settings

from omniroute.core.bounds import unwritable

ERROR_BODY_LIMIT_BYTES = 64 * 1024
SSE_CONTENT_TYPE = "text/event-stream"
BOM = b"\xef\xbb\xbf"
_SSE_STARTS = (b"data:", b"event:", b":", b"id:", b"retry:")
_SSE_HEAD_BYTES = max(map(len, _SSE_STARTS))
_NOT_STREAM_SUFFIXES = ("json", "html", "xml")
_JSON_WHITESPACE = b" \t\r\n"


def not_a_stream(content_type: str) -> bool:
    """A JSON or HTML answer to a stream request, rejected unread. Other types are judged by
    their first chunk: some servers label a well-formed event stream ``text/plain``."""
    media = content_type.partition(";")[0].strip().lower()
    return media != SSE_CONTENT_TYPE and media.endswith(_NOT_STREAM_SUFFIXES)


def json_object(body: bytes) -> dict[str, Any] | None:
    """The JSON object ``body`` holds, else ``None`` (the one parse of a plain answer): also
    ``None`` for one nested deeper than the gateway can write again."""
    if not body.lstrip(_JSON_WHITESPACE).startswith(b"{"):  # HTML, empty: no parse needed
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return parsed if type(parsed) is dict and not unwritable(body, parsed) else None


async def read_capped(response: httpx.Response) -> bytes | None:
    """The whole body, or ``None`` once it passes ``MAX_UPSTREAM_BODY_BYTES`` (not read on)."""
    cap: int = settings.MAX_UPSTREAM_BODY_BYTES
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        return None
    content = read_already(response)
    if content is not None:
        return content if len(content) <= cap else None
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > cap:
            return None
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def sse_head(chunks: AsyncIterator[bytes]) -> bytes | None:
    """The first chunk(s) of a stream, or ``None`` when they do not start like SSE.

    Usually one chunk decides; a first chunk cut inside the leading field name (``da``) or
    holding only blank lines waits for the next one (up to ``ERROR_BODY_LIMIT_BYTES``).
    """
    head = b""
    async for chunk in chunks:  # no aclose on return: the relay goes on with ``chunks``
        head += chunk
        start = head.removeprefix(BOM).lstrip(_JSON_WHITESPACE)
        if start.startswith(_SSE_STARTS):
            return head
        undecided = len(start) < _SSE_HEAD_BYTES and any(s.startswith(start) for s in _SSE_STARTS)
        if not undecided or len(head) > ERROR_BODY_LIMIT_BYTES:
            return None
    return None


def raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as it arrives; a response built already read (as tests may) yields it whole."""
    content = read_already(response)
    return response.aiter_raw() if content is None else _once(content)


def read_already(response: httpx.Response) -> bytes | None:
    """The body of a response built already read (``httpx.Response(content=...)``, as tests
    build them), else ``None``. A transport's response has a stream of its own and is never read
    yet: it is not asked, since asking raises and catches ``httpx.ResponseNotRead`` (0.7 µs in a
    tight loop, more inside a request)."""
    if not isinstance(response.stream, httpx.ByteStream):
        return None
    try:
        return response.content
    except httpx.ResponseNotRead:  # given a byte stream, not read
        return None


async def _once(content: bytes) -> AsyncIterator[bytes]:
    if content:
        yield content


async def read_limited(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in raw_chunks(response):
        parts.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_LIMIT_BYTES:
            break
    return b"".join(parts)[:ERROR_BODY_LIMIT_BYTES]
