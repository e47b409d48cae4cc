"""The live dashboard: its page, its WebSocket, and what the processes publish to it.

The WebSocket runs through the real ASGI application (origin check, session auth, the
consumer) with Channels' communicator and the in-memory channel layer; the store is a fresh
in-process one. The browser and two-process tests are in ``tests/e2e/test_dashboard*.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from omniroute.asgi import application
from omniroute.core.events import ResilienceEvent, during_request, emit
from omniroute.core.store import MemoryStore
from omniroute.dashboard.events import (
    GROUP,
    PROCESS,
    TRAFFIC_PREFIX,
    Publisher,
    TrafficMeter,
    is_error,
    publisher,
)
from omniroute.dashboard.snapshot import traffic_summary
from omniroute.sockets import NOT_FOUND_CLOSE_CODE
from resilience.domain.breaker.machine import BreakerPolicy, FailureKind
from resilience.services.breakers import breaker_record_failure
from routing.proxy.telemetry import AccessRecord

ORIGIN = (b"origin", b"http://testserver")
HOST = (b"host", b"testserver")  # a browser's handshake names its host; the origin must match
RECEIVE_SECONDS = 5


@pytest.fixture(autouse=True)
def no_timed_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the first snapshot and the ones an event wakes: none comes from the timer here."""
    monkeypatch.setattr("omniroute.dashboard.consumers.REFRESH_SECONDS", 3600)


def _session_cookie(*, staff: bool) -> tuple[bytes, bytes]:
    user = User.objects.create_user(f"user-{staff}", password="x", is_staff=staff)
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _connect(*headers: tuple[bytes, bytes]) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[HOST, *headers])
    connected, _ = await communicator.connect(timeout=RECEIVE_SECONDS)
    return communicator, connected


async def _next(communicator: WebsocketCommunicator, kind: str) -> dict[str, Any]:
    """The next message of type ``kind`` (snapshots and events interleave)."""
    while True:
        message: dict[str, Any] = await communicator.receive_json_from(timeout=RECEIVE_SECONDS)
        if message["type"] == kind:
            return message


# -- the page -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_page_is_for_staff_and_carries_the_first_snapshot(
    admin_client: Client, client: Client, fresh_process_store: MemoryStore
) -> None:
    page = admin_client.get("/admin/dashboard/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'id="dashboard-snapshot"' in body and '"type": "snapshot"' in body
    assert "/ws/dashboard/" in body
    assert 'href="/admin/dashboard/"' in admin_client.get("/admin/").content.decode()

    anonymous = client.get("/admin/dashboard/")
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]


@pytest.mark.django_db
def test_the_page_counts_requests_made_before_it_was_opened(
    admin_client: Client, fresh_process_store: MemoryStore
) -> None:
    def inline_traffic() -> Any:
        page = admin_client.get("/admin/dashboard/").content.decode()
        found = re.search(r'<script id="dashboard-snapshot"[^>]*>(.*?)</script>', page, re.S)
        assert found is not None
        return json.loads(found.group(1))["traffic"]

    assert inline_traffic()["idle"] is True
    now = fresh_process_store.clock()
    report = _report("a:1", now - 2, 5, failovers=5)
    async_to_sync(fresh_process_store.set)(f"{TRAFFIC_PREFIX}a:1:1", report, ttl=10)

    traffic = inline_traffic()
    assert (traffic["requests"], traffic["failovers"], traffic["idle"]) == (5, 5, False)
    assert traffic["requests_per_second"] == 0.5


# -- the WebSocket --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_anonymous_and_non_staff_sockets_are_refused(
    fresh_process_store: MemoryStore,
) -> None:
    _, anonymous = await _connect(ORIGIN)
    assert not anonymous
    cookie = await database_sync_to_async(_session_cookie)(staff=False)
    _, member = await _connect(ORIGIN, cookie)
    assert not member


@pytest.mark.django_db(transaction=True)
async def test_a_socket_from_another_origin_is_refused(fresh_process_store: MemoryStore) -> None:
    cookie = await database_sync_to_async(_session_cookie)(staff=True)
    _, connected = await _connect((b"origin", b"http://evil.example"), cookie)
    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_a_socket_from_the_same_host_on_another_port_is_refused(
    fresh_process_store: MemoryStore,
) -> None:
    cookie = await database_sync_to_async(_session_cookie)(staff=True)

    async def connect(origin: bytes) -> bool:
        headers = [(b"host", b"testserver:8000"), (b"origin", origin), cookie]
        communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
        connected, _ = await communicator.connect(timeout=RECEIVE_SECONDS)
        if connected:
            await communicator.disconnect()
        return bool(connected)

    assert not await connect(b"http://testserver:1")
    assert not await connect(b"http://testserver")
    assert await connect(b"http://testserver:8000")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path", ["/ws/other/", "/ws/dashboard/extra/", "/", "/v1/chat/completions"]
)
async def test_a_socket_to_an_unknown_path_is_closed_not_a_500(
    fresh_process_store: MemoryStore, path: str
) -> None:
    communicator = WebsocketCommunicator(application, path, headers=[HOST, ORIGIN])
    connected, code = await communicator.connect(timeout=RECEIVE_SECONDS)
    assert not connected
    assert code == NOT_FOUND_CLOSE_CODE


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "frame",
    [{"text_data": "hello"}, {"bytes_data": b"\x00\xff"}, {"text_data": "[" * 100_000}],
    ids=["not JSON", "binary", "deep"],
)
async def test_what_the_browser_sends_is_ignored(
    fresh_process_store: MemoryStore, frame: dict[str, Any]
) -> None:
    """Once, any frame it could not decode ended the socket with a traceback."""
    cookie = await database_sync_to_async(_session_cookie)(staff=True)
    communicator, connected = await _connect(ORIGIN, cookie)
    assert connected
    await _next(communicator, "snapshot")

    await communicator.send_to(**frame)
    await breaker_record_failure(
        store=fresh_process_store,
        name="acme",
        policy=BreakerPolicy(failure_threshold=1),
        kind=FailureKind.TRANSIENT,
    )

    assert (await _next(communicator, "event"))["subject"] == "acme"  # still open and serving
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_staff_get_a_snapshot_then_an_event_and_the_state_it_left(
    fresh_process_store: MemoryStore,
) -> None:
    cookie = await database_sync_to_async(_session_cookie)(staff=True)
    communicator, connected = await _connect(ORIGIN, cookie)
    assert connected
    first = await _next(communicator, "snapshot")
    assert first["breakers"] == [] and first["connections"] == [] and first["leases"] == []
    assert first["store"]["backend"] == "memory"

    policy = BreakerPolicy(failure_threshold=1)
    await breaker_record_failure(
        store=fresh_process_store, name="acme", policy=policy, kind=FailureKind.TRANSIENT
    )
    event = await _next(communicator, "event")
    assert (event["kind"], event["subject"], event["process"]) == ("breaker", "acme", PROCESS)
    assert event["detail"]["to"] == "open"

    after = await _next(communicator, "snapshot")  # woken by the event
    assert [(b["name"], b["state"]) for b in after["breakers"]] == [("acme", "open")]
    await communicator.disconnect()


async def _caused(store: MemoryStore, name: str, request_id: str) -> None:
    """A breaker opens, during request ``request_id`` (none: ``""``), in a task of its own as
    each request's is."""

    async def failing() -> None:
        if request_id:
            during_request(request_id)
        policy = BreakerPolicy(failure_threshold=1)
        await breaker_record_failure(
            store=store, name=name, policy=policy, kind=FailureKind.TRANSIENT
        )

    await asyncio.get_running_loop().create_task(failing())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("logged", [True, False], ids=["request log on", "request log off"])
async def test_an_event_a_request_caused_links_to_its_request_log_entry(
    fresh_process_store: MemoryStore, settings: Any, logged: bool
) -> None:
    settings.REQUEST_LOG_ENABLED = logged
    cookie = await database_sync_to_async(_session_cookie)(staff=True)
    communicator, connected = await _connect(ORIGIN, cookie)
    assert connected
    await _next(communicator, "snapshot")

    await _caused(fresh_process_store, "acme", "0123abcd")
    caused = await _next(communicator, "event")
    await _caused(fresh_process_store, "other", "")
    uncaused = await _next(communicator, "event")

    link = "/admin/requestlog/requestlogentry/request/0123abcd/" if logged else ""
    assert (caused["subject"], caused["request_id"], caused["request_url"]) == (
        "acme",
        "0123abcd",
        link,
    )
    assert (uncaused["subject"], uncaused["request_id"], uncaused["request_url"]) == (
        "other",
        "",
        "",
    )
    await communicator.disconnect()


def _report(process: str, at: float, requests: int, errors: int = 0, failovers: int = 0) -> Any:
    queues = {"gates": [{"gate": "acme:1", "running": 2, "queued": 3}], "queues": []}
    return {
        "process": process,
        "requests": requests,
        "errors": errors,
        "failovers": failovers,
        "queues": queues,
        "at": at,
    }


@pytest.mark.django_db(transaction=True)
async def test_traffic_every_process_stored_reaches_the_snapshot_and_a_report_wakes_it(
    fresh_process_store: MemoryStore,
) -> None:
    store, now = fresh_process_store, fresh_process_store.clock()
    await store.set(f"{TRAFFIC_PREFIX}a:1:1", _report("a:1", now - 3, 40, 4, 2), ttl=10)
    cookie = await database_sync_to_async(_session_cookie)(staff=True)
    communicator, connected = await _connect(ORIGIN, cookie)
    assert connected
    first = (await _next(communicator, "snapshot"))["traffic"]  # stored before it opened
    assert (first["requests"], first["failovers"], first["processes"]) == (40, 2, 1)

    await store.set(f"{TRAFFIC_PREFIX}b:2:1", _report("b:2", now, 60, 1), ttl=10)
    await get_channel_layer().group_send(GROUP, {"type": "dashboard.traffic", "process": "b:2"})
    traffic = (await _next(communicator, "snapshot"))["traffic"]  # woken by the report
    assert (traffic["requests"], traffic["errors"], traffic["processes"]) == (100, 5, 2)
    assert traffic["error_rate"] == 0.05 and traffic["idle"] is False
    assert {(q["process"], q["queued"]) for q in traffic["queues"]} == {("a:1", 3), ("b:2", 3)}
    await communicator.disconnect()


# -- what a process publishes -----------------------------------------------------------------


async def _listening() -> tuple[Any, str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(GROUP, channel)
    return layer, channel


async def test_an_emitted_resilience_event_is_published_to_the_group() -> None:
    layer, channel = await _listening()
    try:
        emit(ResilienceEvent("model_lock", "acme/m on connection 3", "30.0 s", {"model": "m"}))
        await publisher.settle()
        message = await asyncio.wait_for(layer.receive(channel), RECEIVE_SECONDS)
    finally:
        await layer.group_discard(GROUP, channel)
    assert message["type"] == "dashboard.event"
    assert (message["kind"], message["summary"], message["detail"]) == (
        "model_lock",
        "30.0 s",
        {"model": "m"},
    )


def _finished(status: int, targets: int = 1) -> AccessRecord:
    route = ("r", "POST", "/v1/chat/completions", "k", "m", "-")
    return AccessRecord(*route, status=status, attempts=1, latency_ms=1, bytes=0, targets=targets)


async def test_the_traffic_meter_counts_every_request_and_stores_one_report_per_interval() -> None:
    layer, channel = await _listening()
    own, store = Publisher(), MemoryStore()
    meter = TrafficMeter(own, store=lambda: store)
    try:
        # given: served, failed over (two targets), refused, busy, a client's mistake, left
        for status, targets in ((200, 1), (200, 2), (503, 2), (429, 0), (400, 0), (499, 1)):
            meter.record(_finished(status, targets))
        assert meter.timer is not None  # the first request after a quiet time: reported now
        meter.timer.cancel()
        meter.flush()
        await own.settle()
        note = await asyncio.wait_for(layer.receive(channel), RECEIVE_SECONDS)
    finally:
        await layer.group_discard(GROUP, channel)
    (report,) = (await store.scan(TRAFFIC_PREFIX)).values()
    assert isinstance(report, dict)
    assert (report["requests"], report["errors"], report["failovers"]) == (6, 2, 2)
    assert (report["process"], note["type"]) == (PROCESS, "dashboard.traffic")
    assert (meter.requests, meter.errors, meter.failovers, meter.timer) == (0, 0, 0, None)


async def test_the_traffic_meter_reports_the_first_request_at_once_and_then_once_a_second() -> None:
    meter = TrafficMeter(Publisher(), store=MemoryStore)
    loop = asyncio.get_running_loop()
    meter.record(_finished(200))
    assert meter.timer is not None and meter.timer.when() - loop.time() <= 0.01
    meter.timer.cancel()
    meter.flush()
    meter.record(_finished(200))
    assert meter.timer is not None and meter.timer.when() - loop.time() > 0.9
    meter.timer.cancel()
    await meter.publisher.settle()


async def test_a_request_the_proxy_records_reaches_the_process_meter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from omniroute.dashboard.events import traffic
    from routing.proxy.telemetry import record_request

    # given: the process meter with fresh counts and a report already due (so nothing is sent)
    loop = asyncio.get_running_loop()
    due = loop.call_later(3600, lambda: None)
    for name, value in (("requests", 0), ("errors", 0), ("failovers", 0)):
        monkeypatch.setattr(traffic, name, value)
    monkeypatch.setattr(traffic, "timer", due)
    monkeypatch.setattr(traffic, "loop", loop)
    # when: the proxy records a request that failed over and was then refused
    record_request(_finished(503, targets=2))
    # then
    assert (traffic.requests, traffic.errors, traffic.failovers) == (1, 1, 1)
    due.cancel()


def test_a_publisher_without_a_running_loop_drops_quietly() -> None:
    own = Publisher()
    own.send({"type": "dashboard.event"})
    assert own.tasks == set()


async def test_a_publisher_bounds_its_unsent_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    own = Publisher()
    monkeypatch.setattr("omniroute.dashboard.events.MAX_IN_FLIGHT", 2)
    for _ in range(5):
        own.send({"type": "dashboard.event"})
    assert (len(own.tasks), own.dropped) == (2, 3)
    await own.settle()


@pytest.mark.parametrize(
    ("status", "error"), [(200, False), (400, False), (404, False), (429, True), (503, True)]
)
def test_what_counts_as_an_error(status: int, error: bool) -> None:
    assert is_error(status) is error


def test_the_traffic_summary_forgets_old_reports_and_stale_queues() -> None:
    reports = [_report("a", 99, 30, 3, 1), _report("b", 104, 70)]
    now = traffic_summary(reports, now=105, window=10)
    assert (now["requests_per_second"], now["error_rate"], now["processes"]) == (10.0, 0.03, 2)
    assert (now["failovers"], now["idle"]) == (1, False)
    assert [q["process"] for q in now["queues"]] == ["b"]  # a's queues are older than 5 s
    later = traffic_summary(reports, now=110, window=10)  # a's report left the window
    assert (later["requests"], later["processes"], later["queues"]) == (70, 1, [])


def test_with_no_report_in_the_window_the_traffic_is_idle() -> None:
    idle = traffic_summary([_report("a", 100, 5)], now=200, window=10)
    assert (idle["idle"], idle["processes"], idle["requests"], idle["error_rate"]) == (
        True,
        0,
        0,
        0.0,
    )


@pytest.mark.django_db
def test_the_admin_names_the_product_and_browsers_get_no_favicon_404(admin_client: Client) -> None:
    assert "OmniRoute administration" in admin_client.get("/admin/").content.decode()
    assert admin_client.get("/favicon.ico").status_code == 204
