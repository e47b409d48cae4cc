"""The background writes: run in the order queued, a failure logged and never raised, and one
flush that waits for every write queued on the loop (those queued meanwhile too)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from omniroute.core import tasks

# Every write goes through the database bridge, which touches the connections around it.
pytestmark = pytest.mark.django_db


async def test_writes_run_in_the_order_they_were_queued() -> None:
    ran: list[int] = []
    for n in range(5):
        tasks.write_in_background(ran.append, n)

    await tasks.flush()

    assert ran == [0, 1, 2, 3, 4]


async def test_a_failing_write_is_logged_and_the_next_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> None:
        raise RuntimeError("the row is gone")

    ran: list[str] = []
    failed = tasks.write_in_background(broken)
    tasks.write_in_background(ran.append, "after")

    await failed  # a durable write awaited by its caller never raises either
    await tasks.flush()

    assert ran == ["after"]
    assert "write-through failed (broken)" in caplog.text
    assert any(record.levelno == logging.ERROR for record in caplog.records)


async def test_flush_waits_for_writes_queued_while_it_waits() -> None:
    ran: list[str] = []
    first = tasks.write_in_background(ran.append, "first")

    async def then_second() -> None:
        await first
        tasks.write_in_background(ran.append, "second")

    chained = asyncio.ensure_future(then_second())
    await tasks.flush()

    assert ran == ["first", "second"]
    await chained
