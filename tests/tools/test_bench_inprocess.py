"""The in-process bench's driver: each request goes through the application whole, a given number
at a time, and each status is counted; and its report."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omniroute.tools.bench.inprocess import (
    BARE,
    GATEWAY,
    Options,
    callgrind_total,
    drive,
    http_scope,
    one_request,
    render,
    render_instructions,
    request_body,
)


class CountingApp:
    """An ASGI application that reads the body, answers 200 (or 404 to a body of ``{}``) in two
    parts, waits for the disconnect, and records how many requests it held at once."""

    def __init__(self) -> None:
        self.active = self.most = 0
        self.bodies: list[bytes] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.active += 1
        self.most = max(self.most, self.active)
        message = await receive()
        self.bodies.append(message["body"])
        await asyncio.sleep(0.001)
        status = 404 if message["body"] == b"{}" else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"a", "more_body": True})
        await send({"type": "http.response.body", "body": b"b"})
        assert (await receive())["type"] == "http.disconnect"
        self.active -= 1


def test_every_request_is_answered_and_counted_at_the_given_concurrency() -> None:
    app, body = CountingApp(), request_body("m", stream=False)

    statuses = asyncio.run(drive(app, http_scope(body, []), body, 50, 8))

    assert statuses == {200: 50}
    assert app.most == 8 and app.active == 0
    assert app.bodies == [body] * 50


def test_a_status_is_counted_as_it_came() -> None:
    app = CountingApp()

    statuses = asyncio.run(drive(app, http_scope(b"{}", []), b"{}", 3, 1))

    assert statuses == {404: 3} and app.most == 1


def test_the_scope_carries_the_bodys_length_after_the_given_headers() -> None:
    scope = http_scope(b"12345", [(b"authorization", b"Bearer k")])

    assert scope["method"] == "POST" and scope["path"] == "/v1/chat/completions"
    assert scope["headers"] == [(b"authorization", b"Bearer k"), (b"content-length", b"5")]


def test_the_report_gives_each_sides_median_and_their_ratio() -> None:
    result = {
        "figures": {GATEWAY: [300.0, 310.0, 400.0], BARE: [150.0, 100.0, 160.0]},
        "statuses": {GATEWAY: {"200": 3}, BARE: {"200": 3}},
    }

    text = render(Options(stream=True, concurrency=16, requests=10, rounds=3), result)

    assert "| gateway | 310.0 | 300 · 310 · 400 | 200: 3 |" in text
    assert "| bare proxy | 150.0 | 150 · 100 · 160 | 200: 3 |" in text
    assert "gateway / bare proxy: 2.07× (+160.0 µs)" in text
    assert text.startswith("streams, 16 at a time")


def test_callgrinds_count_is_read_from_its_totals_line() -> None:
    text = "events: Ir\nsummary: 0\nfn=(1) main\n3 17\ntotals: 1643919216\n"

    assert callgrind_total(text) == 1_643_919_216


def test_a_callgrind_file_without_totals_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no totals"):
        callgrind_total("events: Ir\nfn=(1) main\n")


def test_the_instruction_report_gives_each_side_per_request_and_their_ratio() -> None:
    result = {
        "instructions": {GATEWAY: 1_532_700.0, BARE: 794_600.0},
        "statuses": {GATEWAY: {"200": 300}, BARE: {"200": 300}},
    }

    text = render_instructions(Options(stream=False, concurrency=1, requests=300, rounds=1), result)

    assert "| gateway | 1,532.7 k | 200: 300 |" in text
    assert "| bare proxy | 794.6 k | 200: 300 |" in text
    assert "gateway / bare proxy: 1.93× (+738.1 k)" in text
    assert text.startswith("plain requests, 1 at a time, 300 requests counted")


class LateRecorder:
    """An ASGI application that answers at once, then keeps working 50 ms before it returns."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        await asyncio.sleep(0.05)  # the request's bookkeeping: no longer the client's wait


def test_the_time_to_the_answer_stops_at_its_last_part_not_at_the_applications_return() -> None:
    answered_in: list[int] = []
    scope = http_scope(b"{}", [])

    async def one() -> tuple[int, float]:
        started = asyncio.get_running_loop().time()
        status = await one_request(LateRecorder(), scope, b"{}", answered_in)
        return status, asyncio.get_running_loop().time() - started

    status, whole = asyncio.run(one())

    assert status == 200 and whole >= 0.05  # the application returned after its own work
    assert len(answered_in) == 1 and answered_in[0] < 0.05 * 1e9  # the answer came before it


def test_drive_times_every_request_when_asked() -> None:
    app, body = CountingApp(), request_body("m", stream=False)
    answered_in: list[int] = []

    asyncio.run(drive(app, http_scope(body, []), body, 5, 1, answered_in))

    assert len(answered_in) == 5 and all(ns >= 1_000_000 for ns in answered_in)  # 1 ms sleep


def test_the_report_adds_the_latency_table_one_at_a_time() -> None:
    result = {
        "figures": {GATEWAY: [300.0, 310.0, 400.0], BARE: [150.0, 100.0, 160.0]},
        "statuses": {GATEWAY: {"200": 3}, BARE: {"200": 3}},
        "latency": {GATEWAY: [600.0, 580.0, 610.0], BARE: [410.0, 420.0, 400.0]},
    }

    text = render(Options(stream=False, concurrency=1, requests=10, rounds=3), result)

    assert "| gateway | 600.0 | 600 · 580 · 610 |" in text
    assert "| bare proxy | 410.0 | 410 · 420 · 400 |" in text
    assert "added by the gateway: +190.0 µs (the served bench's bar at one client: +100 µs)" in text


def test_the_report_has_no_latency_table_under_concurrency() -> None:
    result = {
        "figures": {GATEWAY: [300.0], BARE: [150.0]},
        "statuses": {GATEWAY: {"200": 1}, BARE: {"200": 1}},
        "latency": {GATEWAY: [], BARE: []},
    }

    text = render(Options(stream=False, concurrency=16, requests=10, rounds=1), result)

    assert "added by the gateway" not in text
