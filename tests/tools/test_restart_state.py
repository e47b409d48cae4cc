"""The comparison behind ``make restart-test``: equal state passes, and each kind of loss
(a breaker closed, a cooldown reset, a lock gone, a lease moved, a lease row twice) is named."""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from omniroute.tools.restart.state import Scenario, Snapshot, compare, lease_rows

LOCKED = (("p-flaky", 3, "m"), ("p-hint", 4, "m"))


def scenario() -> Scenario:
    return Scenario(
        client_key="k",
        managed_key="mk",
        load_model="p-load/m",
        held_model="p-held/m",
        breakers=("p-a", "p-b"),
        cooled=1,
        terminal=2,
        locked=LOCKED,
        lease_model="p-lease/m",
        lease_connections=(5, 6, 7),
        owners={"vlo_one": 1, "vlo_two": 1},
    )


def before() -> Snapshot:
    return Snapshot(
        breakers={
            "p-a": {"state": "open", "lastFailureTime": 1000, "openCycleCount": 0},
            "p-b": {"state": "degraded", "lastFailureTime": 1001, "openCycleCount": 0},
        },
        connections={
            1: {
                "test_status": "unavailable",
                "rate_limited_until": "2026-12-02T10:00:00Z",
                "backoff_level": 0,
                "error_code": "429",
            },
            2: {
                "test_status": "expired",
                "rate_limited_until": None,
                "backoff_level": 0,
                "error_code": "401",
            },
        },
        locks={pair: {"until": 9000, "reason": "r"} for pair in LOCKED},
        leases={
            "vlo_one": {"generation": 1, "connection": {"displayName": "c1"}},
            "vlo_two": {"generation": 1, "connection": {"displayName": "c2"}},
        },
    )


def after() -> Snapshot:
    snap = copy.deepcopy(before())
    snap.breakers["p-b"]["state"] = "open"  # opened by the last call before the kill
    return snap


def test_the_same_state_after_the_restart_passes() -> None:
    problems: list[str] = []
    assert compare(before(), after(), scenario(), problems) == 8
    assert problems == []


@pytest.mark.parametrize(
    ("lose", "named"),
    [
        (lambda s: s.breakers["p-a"].update(state="closed"), "breaker p-a"),
        (lambda s: s.breakers["p-b"].update(state="degraded"), "breaker p-b"),
        (lambda s: s.connections[1].update(rate_limited_until=None), "connection 1"),
        (lambda s: s.connections[2].update(test_status="active"), "connection 2"),
        (lambda s: s.locks.pop(LOCKED[1]), "model lock ('p-hint', 4, 'm')"),
        (lambda s: s.leases["vlo_two"].update(connection={"displayName": "c3"}), "lease vlo_two"),
    ],
)
def test_each_loss_is_named(lose: Callable[[Snapshot], object], named: str) -> None:
    changed = after()
    lose(changed)
    problems: list[str] = []
    compare(before(), changed, scenario(), problems)
    assert len(problems) == 1 and problems[0].startswith(named), problems


def test_lease_rows_counts_active_rows_per_connection(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "omniroute.sqlite3") as db:
        db.execute("CREATE TABLE exclusive_connection_leases (connection_id INT, state TEXT)")
        rows = [(5, "ACTIVE"), (6, "ACTIVE"), (6, "ACTIVE"), (7, "RELEASED"), (9, "ACTIVE")]
        db.executemany("INSERT INTO exclusive_connection_leases VALUES (?, ?)", rows)

    counted = lease_rows({}, str(tmp_path), scenario())
    assert (counted.active, counted.duplicated) == (3, [(6, 2)])
