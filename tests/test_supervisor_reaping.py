"""The supervisor as a container's PID 1: it inherits what a worker leaves behind (its
request-log writer process outlives it by a moment) and must reap it, or each worker restart
leaves a zombie; and it must never reap a worker, whose exit status its restart log reports.

The scenario runs in a process of its own, a child subreaper (as PID 1 is), so that it reaps
nothing of the test run's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCENARIO = textwrap.dedent(
    """
    import ctypes, os, subprocess, sys
    from omniroute.supervisor import reap_orphans

    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1) == 0

    # a "worker" that starts a child and exits at once: the child is ours now, an orphan
    leaves = "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', '']).pid)"
    worker = subprocess.run([sys.executable, "-c", leaves], capture_output=True, text=True)
    orphan = int(worker.stdout)
    os.waitid(os.P_PID, orphan, os.WEXITED | os.WNOWAIT)  # until it exited, unreaped

    # a real worker that exited with status 3, still to be read by its Popen
    kept = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    os.waitid(os.P_PID, kept.pid, os.WEXITED | os.WNOWAIT)

    reap_orphans({kept.pid})  # may stop at the worker, never reap it
    status = kept.wait()  # what the supervisor's Popen reads: 0 had the worker been reaped
    reap_orphans(set())  # the next round, past a worker now replaced

    try:
        os.waitpid(orphan, os.WNOHANG)
        print("orphan left a zombie")
    except ChildProcessError:
        print("orphan reaped")
    print("worker status", status)
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="a child subreaper is Linux's")
def test_orphans_are_reaped_and_workers_are_not() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCENARIO],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["orphan reaped", "worker status 3"]
