"""Gateway CPU summed over a process tree: ``serve --workers N`` runs a supervisor and N worker
processes, and the paired bench charges all of them to the side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omniroute.tools.loadgen import CLOCK_TICKS, process_cpu_seconds, process_tree_cpu_seconds

BURN_SECONDS = 0.05  # the child's CPU before it says so; several clock ticks


def fake_process(proc: Path, pid: int, parent: int, ticks: tuple[int, int]) -> None:
    """A ``/proc/<pid>/stat`` with ``parent`` and ``ticks`` (user, system); its command name has
    a space and a parenthesis, as a real one may."""
    (proc / str(pid)).mkdir()
    middle = " ".join(["0"] * 9)
    stat = f"{pid} (a (b) c) S {parent} {middle} {ticks[0]} {ticks[1]} 0 0 20 0 1\n"
    (proc / str(pid) / "stat").write_text(stat)


def test_the_tree_sums_a_process_and_all_its_descendants_and_no_other(tmp_path: Path) -> None:
    fake_process(tmp_path, 10, 1, (100, 20))  # the supervisor
    fake_process(tmp_path, 11, 10, (300, 40))  # a worker
    fake_process(tmp_path, 12, 10, (200, 30))  # another
    fake_process(tmp_path, 13, 12, (5, 5))  # a worker's child
    fake_process(tmp_path, 20, 1, (9000, 900))  # a stranger
    (tmp_path / "14").mkdir()  # a process that exited while /proc was read
    (tmp_path / "self").mkdir()

    expected = (100 + 20 + 300 + 40 + 200 + 30 + 5 + 5) / CLOCK_TICKS
    assert process_tree_cpu_seconds(10, tmp_path) == pytest.approx(expected)
    assert process_tree_cpu_seconds(12, tmp_path) == pytest.approx(240 / CLOCK_TICKS)
    assert process_tree_cpu_seconds(99, tmp_path) == 0.0


def test_a_live_childs_cpu_counts_towards_its_parents_tree() -> None:
    burn = (
        "import sys, time\n"
        f"while time.process_time() < {BURN_SECONDS}: pass\n"
        "print('burnt', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "burnt\n"
        childs = process_cpu_seconds(child.pid)
        own = process_cpu_seconds(os.getpid())
        assert childs > 0
        assert process_tree_cpu_seconds(os.getpid()) >= own + childs
    finally:
        child.communicate("")
