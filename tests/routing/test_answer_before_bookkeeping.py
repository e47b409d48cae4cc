"""The answer's last part goes to the server before the request's own bookkeeping
(docs/architecture.md, "One request"): daphne writes on its loop's next turn, so the shell
yields once after the last part, and only then is the request counted and logged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omniroute.asgi import application
from routing.proxy import telemetry
from routing.proxy.telemetry import AccessRecord

ROUTER = application.application_mapping["http"]


async def test_the_loop_turns_once_between_the_last_part_and_the_recording(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded: list[AccessRecord] = []
    monkeypatch.setattr(telemetry, "_listeners", [recorded.append])
    counted_at_next_turn: list[int] = []
    answered = asyncio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body"):
            # What a server writing on the loop's next turn would find then.
            asyncio.get_running_loop().call_soon(lambda: counted_at_next_turn.append(len(recorded)))
            answered.set()

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/no-such-endpoint",
        "raw_path": b"/v1/no-such-endpoint",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await asyncio.wait_for(ROUTER(scope, receive, send), 10)

    assert counted_at_next_turn == [0]  # the answer had the turn before the bookkeeping
    assert [record.status for record in recorded] == [404]  # and the request was counted once
