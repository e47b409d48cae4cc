"""The periodic expired re-check: the housekeeping runs whatever pass routing registered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from resilience.hooks import replaced_hooks
from resilience.services import housekeeping


@pytest.fixture
def periodic(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """A fresh periodic state with no pass handed in, a hand-moved monotonic clock
    (``clock[0]``)."""
    clock = [1_000.0]
    monkeypatch.setattr(housekeeping, "_expired_recheck", housekeeping._Periodic())
    monkeypatch.setattr(housekeeping.time, "monotonic", lambda: clock[0])
    with replaced_hooks(expired_recheck=None):
        yield clock


def _counting(passes: list[int]) -> Callable[[], object]:
    return lambda: passes.append(1)


async def _tick() -> None:
    housekeeping._maybe_recheck_expired()
    task = housekeeping._expired_recheck.task
    if task is not None:
        await task


async def test_periodic_pass_runs_every_60_s_in_the_background(periodic: list[float]) -> None:
    passes: list[int] = []

    with replaced_hooks(expired_recheck=_counting(passes)):
        for advance in (0, 59, 1, 30, 30):
            periodic[0] += advance
            await _tick()

    assert len(passes) == 2  # at 60 s and 120 s after the first request


async def test_nothing_runs_until_a_pass_is_registered(periodic: list[float]) -> None:
    passes: list[int] = []
    for _ in range(3):
        periodic[0] += 60
        await _tick()

    with replaced_hooks(expired_recheck=_counting(passes)):
        periodic[0] += 60
        await _tick()

        # The first pass is one interval after the first request that can run it.
        assert passes == []
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

    monkeypatch.setattr(housekeeping, "_recheck_expired", slow)
    with replaced_hooks(expired_recheck=lambda: None):
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

    with replaced_hooks(expired_recheck=broken):
        await housekeeping._recheck_expired()

    assert "expired re-check pass failed" in caplog.text
