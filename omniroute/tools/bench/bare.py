"""The bench's ceiling: the thinnest Channels proxy on daphne, as an ASGI application.

One ``AsyncHttpConsumer`` forwards every POST, its path and body as they are, to the upstream
named by ``OMNIROUTE_BARE_PROXY_UPSTREAM`` (a base URL such as ``http://127.0.0.1:8100``) over
the gateway's own upstream stack (httpx on the pooled aiohttp transport of
``routing.proxy.upstream.client``). A plain answer goes back whole; a stream goes back chunk by
chunk through the gateway's SSE splitter (``routing.domain.streams.sse``), each chunk's
complete events as one body part. No routing, no authentication, no state, no request log:
``manage.py bench`` serves it with the gateway's server entry (``omniroute.server``: uvloop,
daphne with back-pressure), so its rows beside the gateway's measure only the gateway's own
work (docs/architecture.md, checks and measurements).

A development tool: never loaded by the gateway, and left out of the production image. The
server entry closes only the gateway's upstream pools when it stops, so this one's exit logs an
unclosed aiohttp session: noise of a bench process, nothing leaks past its end.
"""

from __future__ import annotations

import os
from typing import Any

import django
import httpx
import orjson

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute.settings")
django.setup()

# Imported after Django is set up: the upstream stack reads settings.
from channels.generic.http import AsyncHttpConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from omniroute.tools.bench.bare_server import UPSTREAM_VARIABLE  # noqa: E402
from routing.domain.streams.sse import SseSplitter  # noqa: E402
from routing.proxy.upstream.client import (  # noqa: E402
    Upstream,
    default_timeout,
    upstream_request,
)

NO_CHANNEL_LAYER = "bare-proxy-has-no-channel-layer"
UPSTREAM_BASE_URL = os.environ[UPSTREAM_VARIABLE].rstrip("/")  # read once; unset: no start
_upstream = Upstream()  # only for its per-event-loop pooled transport


def request_headers(stream: bool) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "text/event-stream" if stream else "application/json",
        "accept-encoding": "identity",
    }


def wants_stream(body: bytes) -> bool:
    """Whether the request asks for a stream (a body that is not a JSON object does not)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


class BareProxy(AsyncHttpConsumer):  # channels ships no types: AsyncHttpConsumer is Any
    """Forwards one request upstream and relays the answer; nothing else."""

    channel_layer_alias = NO_CHANNEL_LAYER  # no channel per request, as the gateway

    async def dispatch(self, message: dict[str, Any]) -> None:
        # As the gateway's consumers: no database, so no close_old_connections thread hop.
        await getattr(self, message["type"].replace(".", "_"))(message)

    async def handle(self, body: bytes) -> None:
        stream = wants_stream(body)
        url, host = _upstream.url(UPSTREAM_BASE_URL, self.scope["path"])
        request = upstream_request(url, host, request_headers(stream), body, default_timeout())
        response = await _upstream.transport("bare").handle_async_request(request)
        response.request = request
        try:
            head = [(b"content-type", response.headers.get("content-type", "").encode())]
            if stream:  # the head of the gateway's own answers, less its decision header
                head.append((b"cache-control", b"no-cache"))
                await self.send_headers(status=response.status_code, headers=head)
                await self.relay(response)
            else:
                whole = await response.aread()
                head.append((b"content-length", str(len(whole)).encode()))
                await self.send_response(response.status_code, whole, headers=head)
        finally:
            await response.aclose()

    async def relay(self, response: httpx.Response) -> None:
        """Each chunk's complete events as one body part; a trailing unterminated event last."""
        splitter = SseSplitter(settings.MAX_SSE_EVENT_BYTES)
        async for chunk in response.aiter_raw():
            events = splitter.feed(chunk)
            if events:
                part = events[0].raw if len(events) == 1 else b"".join(e.raw for e in events)
                await self.send_body(part, more_body=True)
        rest = splitter.rest()
        await self.send_body(rest.raw if rest is not None else b"")


application = ProtocolTypeRouter({"http": BareProxy.as_asgi()})
