"""A small reverse proxy on 127.0.0.1 for the end-to-end tests: what a TLS-terminating proxy
(nginx, Caddy) does to a request once it has decrypted it, without the TLS.

Every request and WebSocket handshake is passed on to the gateway with ``X-Forwarded-Proto:
https`` (set, overwriting any the client sent) and ``X-Forwarded-For``; the ``Host`` is the
client's (nginx's ``proxy_set_header Host $host``) or, with ``pass_host=False``, the gateway's
own address (nginx's default). A WebSocket the gateway refuses is refused with its status; an
accepted one is relayed both ways until either side closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
from aiohttp import WSMsgType, web
from multidict import CIMultiDict

# Headers that describe one hop, not the request: never passed on (RFC 9110, 7.6.1).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "x-forwarded-proto",
        "x-forwarded-for",
    }
)


@dataclass
class ForwardingProxy:
    """Forwards to ``upstream`` (``http://127.0.0.1:PORT``) over ``session``."""

    upstream: str
    session: aiohttp.ClientSession
    pass_host: bool = True

    def headers(self, request: web.Request) -> CIMultiDict[str]:
        passed = CIMultiDict(
            (name, value)
            for name, value in request.headers.items()
            if name.lower() not in HOP_BY_HOP and not name.lower().startswith("sec-websocket-")
        )
        passed["Host"] = request.host if self.pass_host else self.upstream.split("://", 1)[1]
        passed["X-Forwarded-Proto"] = "https"
        passed["X-Forwarded-For"] = request.remote or "127.0.0.1"
        return passed

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self.relay_socket(request)
        return await self.forward(request)

    async def forward(self, request: web.Request) -> web.Response:
        async with self.session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=self.headers(request),
            data=await request.read(),
            allow_redirects=False,
        ) as answer:
            body = await answer.read()
            headers = CIMultiDict(
                (name, value)
                for name, value in answer.headers.items()
                if name.lower() not in HOP_BY_HOP
            )
            return web.Response(status=answer.status, body=body, headers=headers)

    async def relay_socket(self, request: web.Request) -> web.StreamResponse:
        url = "ws" + self.upstream.removeprefix("http") + request.path_qs
        try:
            upstream = await self.session.ws_connect(url, headers=self.headers(request))
        except aiohttp.WSServerHandshakeError as refused:
            return web.Response(status=refused.status)
        client = web.WebSocketResponse()
        await client.prepare(request)
        async with upstream:
            await asyncio.gather(_pipe(client, upstream), _pipe(upstream, client))
        return client


async def _pipe(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    async for message in source:
        if message.type == WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == WSMsgType.BINARY:
            await sink.send_bytes(message.data)
    await sink.close()


@asynccontextmanager
async def forwarding_proxy(upstream: str, *, pass_host: bool = True) -> AsyncIterator[str]:
    """A proxy to ``upstream`` on a free port of 127.0.0.1 for the block; its URL."""
    async with aiohttp.ClientSession(
        cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
    ) as session:
        proxy = ForwardingProxy(upstream, session, pass_host)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy.handle)
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            host, port = runner.addresses[0][:2]
            yield f"http://{host}:{port}"
        finally:
            await runner.cleanup()
