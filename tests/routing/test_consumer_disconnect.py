"""A client that leaves cancels its request's work; a request that ends quickly pays for no
watcher (docs/architecture.md, "One request"): the task that watches for ``http.disconnect``
starts only once the work has run for ``WATCH_AFTER_SECONDS``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.routing.harness import (
    OK,
    PRIMARY,
    RECEIVE_TIMEOUT_SECONDS,
    FakeWriter,
    Gateway,
    chat,
    communicator,
    send_body,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def tasks_created() -> AsyncIterator[list[Any]]:
    """The coroutines of the tasks the event loop creates from now on."""
    loop = asyncio.get_running_loop()
    created: list[Any] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        created.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    previous = loop.get_task_factory()
    loop.set_task_factory(factory)
    try:
        yield created
    finally:
        loop.set_task_factory(previous)


async def test_a_request_that_ends_quickly_starts_no_task(
    gateway: Gateway, primary: int, tasks_created: list[Any]
) -> None:
    gateway.fake.behaviours[PRIMARY] = OK
    assert await gateway.drive(chat(), 1) == [200]  # warm: snapshot and pools built
    tasks_created.clear()

    assert await gateway.drive(chat(), 5) == [200] * 5

    assert tasks_created == []


async def test_a_plain_request_whose_client_leaves_cancels_its_upstream_call(
    gateway: Gateway, primary: int, request_log: FakeWriter
) -> None:
    # given: an upstream that never answers
    called, cancelled = asyncio.Event(), asyncio.Event()

    async def hanging(request: httpx.Request) -> httpx.Response:
        called.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    gateway.fake.behaviours[PRIMARY] = hanging
    comm = communicator(gateway.app, gateway.key)
    await send_body(comm, chat())
    await asyncio.wait_for(called.wait(), RECEIVE_TIMEOUT_SECONDS)

    # when: the client leaves
    await comm.send_input({"type": "http.disconnect"})

    # then: the upstream call is cancelled and the request is logged as the client's leaving
    await asyncio.wait_for(cancelled.wait(), RECEIVE_TIMEOUT_SECONDS)
    await comm.wait(RECEIVE_TIMEOUT_SECONDS)
    [record] = request_log.records
    assert record.status == 499
