"""The bare-workers phase: the bare proxy as one process against two on one socket, and when
the bench starts measuring two processes (once both wait in their event loops)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from omniroute.tools.bench.bare_server import wait_until_serving
from omniroute.tools.bench.bare_workers import ONE, TWO, summary
from omniroute.tools.loadgen import RunResult

# A process that starts its event loop only after a second of start-up work.
LATE_LOOP = "import select, time; time.sleep(1.0); select.epoll().poll(30)"
READY_SECONDS = 1.0


def _run(label: str, stream: bool, cpu: float | None, requests: int = 1000) -> RunResult:
    return RunResult(label, stream, 64, requests, 0, 1.0, 1.0, 2.0, 1.0, cpu)


def test_the_summary_sets_two_processes_cpu_per_request_against_ones() -> None:
    rows = [_run(ONE, False, 0.4), _run(TWO, False, 0.46, 1200), _run(ONE, True, 1.0)]
    rows.append(_run(TWO, True, None))  # a figure missing: no line for it

    lines = summary(rows)

    assert lines == [
        f"{TWO} non-stream c=64 over {ONE}: CPU per request 1.15× (0.460 vs 0.400 ms),"
        " req/s 1200 vs 1000"
    ]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/<pid>/wchan")
def test_measuring_waits_until_every_process_waits_in_its_event_loop() -> None:
    late = [subprocess.Popen([sys.executable, "-c", LATE_LOOP]) for _ in range(2)]
    try:
        started = time.monotonic()
        wait_until_serving(tuple(p.pid for p in late), timeout=20)
        waited = time.monotonic() - started

        assert READY_SECONDS <= waited < 20
        assert all(p.poll() is None for p in late)
    finally:
        for process in late:
            process.kill()
            process.wait()
