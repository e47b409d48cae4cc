"""The periodic expired re-check: the housekeeping runs whatever pass routing registered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from resilience.services import housekeeping


@pytest.fixture
def periodic(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fresh periodic state, a hand-moved monotonic clock (``clock[0]``)."""
    clock = [1_000.0]
    monkeypatch.setattr(housekeeping, "_expired_recheck", housekeeping._Periodic())
    monkeypatch.setattr(housekeeping.time, "monotonic", lambda: clock[0])
    return clock


def _counting(passes: list[int]) -> Callable[[], object]:
    return lambda: passes.append(1)


async def _tick() -> None:
    housekeeping._maybe_recheck_expired()
    task = housekeeping._expired_recheck.task
    if task is not None:
        await task


async def test_periodic_pass_runs_every_60_s_in_the_background(periodic: list[float]) -> None:
    passes: list[int] = []
    housekeeping.register_expired_recheck(_counting(passes))

    for advance in (0, 59, 1, 30, 30):
        periodic[0] += advance
        await _tick()

    assert len(passes) == 2  # at 60 s and 120 s after the first request


async def test_nothing_runs_until_a_pass_is_registered(periodic: list[float]) -> None:
    passes: list[int] = []
    for _ in range(3):
        periodic[0] += 60
        await _tick()

    housekeeping.register_expired_recheck(_counting(passes))
    periodic[0] += 60
    await _tick()

    assert passes == []  # the first pass is one interval after the first request that can run it
    periodic[0] += 60
    await _tick()
    assert passes == [1]


async def test_periodic_passes_never_overlap(
    periodic: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def slow() -> None:
        started.append(1)
        await release.wait()

    housekeeping.register_expired_recheck(lambda: None)
    monkeypatch.setattr(housekeeping, "_recheck_expired", slow)
    housekeeping._maybe_recheck_expired()
    periodic[0] += 60
    housekeeping._maybe_recheck_expired()
    periodic[0] += 120
    housekeeping._maybe_recheck_expired()
    await asyncio.sleep(0)

    assert started == [1]
    release.set()
    task = housekeeping._expired_recheck.task
    assert task is not None
    await task


async def test_a_failing_pass_is_logged_not_raised(
    periodic: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("boom")

    housekeeping.register_expired_recheck(broken)

    await housekeeping._recheck_expired()

    assert "expired re-check pass failed" in caplog.text
