"""The WebSocket paths the gateway does not serve: refused with a close, never a 500.

Channels' router raises on a path it has no route for, which daphne logged as a traceback
and answered 500; this consumer is the router's last route instead.
"""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer

NOT_FOUND_CLOSE_CODE = 4404  # the application range of close codes, 4000-4999: "404"


class NoSuchSocket(AsyncWebsocketConsumer):  # channels ships no types: the base is Any
    """Any WebSocket path but the dashboard's: the handshake is refused (daphne answers 403)."""

    async def connect(self) -> None:
        await self.close(code=NOT_FOUND_CLOSE_CODE)
