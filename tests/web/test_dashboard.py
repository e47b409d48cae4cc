"""The live dashboard: its page, its WebSocket, and what the processes publish to it.

The WebSocket runs through the real ASGI application (origin check, session auth, the
consumer) with Channels' communicator and the in-memory channel layer; the store is a fresh
in-process one. The browser and two-process tests are in ``tests/e2e/test_dashboard*.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from omniroute.asgi import application
from omniroute.dashboard.events import GROUP, PROCESS, Publisher, TrafficMeter, is_error, publisher
from omniroute.dashboard.snapshot import TrafficWindow
from resilience.domain.breaker import BreakerPolicy, FailureKind
from resilience.events import ResilienceEvent, emit
from resilience.services.breakers import breaker_record_failure
from resilience.store import MemoryStore

ORIGIN = (b"origin", b"http://testserver")
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
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=list(headers))
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


@pytest.mark.django_db(transaction=True)
async def test_traffic_reports_from_every_process_reach_the_snapshot(
    fresh_process_store: MemoryStore,
) -> None:
    cookie = await database_sync_to_async(_session_cookie)(staff=True)
    communicator, connected = await _connect(ORIGIN, cookie)
    assert connected
    await _next(communicator, "snapshot")
    layer = get_channel_layer()
    queues = {"gates": [{"gate": "acme:1", "running": 2, "queued": 3}], "queues": []}
    for process, requests, errors in (("a:1", 40, 4), ("b:2", 60, 1)):
        report = {"type": "dashboard.traffic", "process": process, "requests": requests,
                  "errors": errors, "seconds": 1.0, "queues": queues}  # fmt: skip
        await layer.group_send(GROUP, report)
    emit(ResilienceEvent("cooldown", "connection 1", "1000 ms"))  # wakes a snapshot now
    await publisher.settle()
    await _next(communicator, "event")
    traffic = (await _next(communicator, "snapshot"))["traffic"]
    assert (traffic["requests"], traffic["errors"], traffic["processes"]) == (100, 5, 2)
    assert traffic["error_rate"] == 0.05
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
        "model_lock", "30.0 s", {"model": "m"},
    )  # fmt: skip


async def test_the_traffic_meter_reports_its_interval_once_then_starts_again() -> None:
    layer, channel = await _listening()
    own = Publisher()
    meter = TrafficMeter(own)
    try:
        for status in (200, 200, 503, 429, 400):
            meter.record(status)
        assert meter.timer is not None  # one report scheduled for the interval
        meter.timer.cancel()
        meter.flush()
        await own.settle()
        report = await asyncio.wait_for(layer.receive(channel), RECEIVE_SECONDS)
    finally:
        await layer.group_discard(GROUP, channel)
    assert (report["requests"], report["errors"], report["process"]) == (5, 2, PROCESS)
    assert (meter.requests, meter.errors, meter.timer) == (0, 0, None)


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


def test_the_traffic_window_forgets_old_reports_and_stale_queues() -> None:
    window = TrafficWindow(window=10)
    gate = {"gates": [{"gate": "g", "running": 1, "queued": 4}], "queues": []}
    window.add({"process": "a", "requests": 30, "errors": 3, "queues": gate}, now=100)
    window.add({"process": "b", "requests": 70, "errors": 0, "queues": {}}, now=104)
    now = window.summary(now=105)
    assert (now["requests_per_second"], now["error_rate"], now["processes"]) == (10.0, 0.03, 2)
    assert now["queues"] == [
        {"process": "a", "kind": "gate", "name": "g", "queued": 4, "running": 1}
    ]
    later = window.summary(now=112)  # a's report is older than the window, b's is not
    assert (later["requests"], later["processes"], later["queues"]) == (70, 1, [])
    assert window.summary(now=200)["error_rate"] == 0.0


@pytest.mark.django_db
def test_the_admin_names_the_product_and_browsers_get_no_favicon_404(admin_client: Client) -> None:
    assert "OmniRoute administration" in admin_client.get("/admin/").content.decode()
    assert admin_client.get("/favicon.ico").status_code == 204
