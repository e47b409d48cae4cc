"""The bench's children are stopped one way: terminated, killed when they outlive the grace,
and reaped either way (``omniroute.tools.loadgen.stop``)."""

from __future__ import annotations

import signal
import subprocess
import sys

from omniroute.tools.loadgen import stop

IGNORES_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
WAITS = "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n"


def started(code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    return process


def test_a_child_that_ends_on_sigterm_is_terminated_and_reaped() -> None:
    process = started(WAITS)

    stop(process, grace=10.0)

    assert process.returncode == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_and_reaped() -> None:
    process = started(IGNORES_TERM)

    stop(process, grace=0.2)

    assert process.returncode == -signal.SIGKILL
