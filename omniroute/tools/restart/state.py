"""What ``manage.py restarttest`` reads of a gateway's state, and how before and after compare.

Everything is read the way an operator reads it: the health payload (breakers), the connection
endpoint (cooldowns, terminal states), the model-cooldowns listing (locks) and the lease API's
``status`` action; the lease rows themselves are counted in the database, with no gateway code.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

BREAKER_FIELDS = ("state", "lastFailureTime", "openCycleCount")
CONNECTION_FIELDS = ("test_status", "rate_limited_until", "backoff_level", "error_code")
LOCK_FIELDS = ("until", "lockedAtMs", "reason", "timerClass", "failureCount")
LEASE_FIELDS = ("state", "generation", "acquiredAt", "expiresAt", "connection")
OWNER_HEADER = "x-omniroute-lease-owner"


class Reader(Protocol):
    url: str

    def get(self, path: str) -> Any: ...


@dataclass
class Scenario:
    """The run's names: which provider, connection and model holds which piece of state."""

    client_key: str
    managed_key: str
    load_model: str
    held_model: str  # the request in flight at the kill (module doc of check)
    breakers: tuple[str, str]  # opened early; opened by the last call before the kill
    cooled: int  # connection cooling down on an upstream Retry-After
    terminal: int  # connection made terminal by a 401
    locked: tuple[tuple[str, int, str], ...]  # (provider, connection, model) pairs locked
    lease_model: str
    lease_connections: tuple[int, ...]
    owners: dict[str, int] = field(default_factory=dict)  # lease owner → generation
    providers: dict[int, str] = field(default_factory=dict)  # connection id → provider

    def provider_of(self, connection: int) -> str:
        return self.providers[connection]


@dataclass
class Snapshot:
    breakers: dict[str, dict[str, Any]]
    connections: dict[int, dict[str, Any]]
    locks: dict[tuple[str, int, str], dict[str, Any]]
    leases: dict[str, dict[str, Any]]

    def breaker_state(self, name: str) -> str | None:
        breaker = self.breakers.get(name)
        return None if breaker is None else str(breaker["state"])


def _lease_status(url: str, key: str, owner: str, generation: int) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/api/v1/session-leases",
        json={"action": "status", "generation": generation},
        headers={"authorization": f"Bearer {key}", OWNER_HEADER: owner},
        timeout=15,
    )
    if answer.status_code != 200:
        return {"status": answer.status_code, "body": answer.text[:200]}
    return {name: answer.json().get(name) for name in LEASE_FIELDS}


def snapshot(reader: Reader, sc: Scenario) -> Snapshot:
    health = reader.get("/api/monitoring/health")
    mine = set(sc.breakers)
    breakers = {
        b["name"]: {name: b.get(name) for name in BREAKER_FIELDS}
        for b in health["providerBreakers"]
        if b["name"] in mine
    }
    connections = {}
    for connection in (sc.cooled, sc.terminal):
        row = reader.get(f"/api/connections/{connection}/")
        connections[connection] = {name: row.get(name) for name in CONNECTION_FIELDS}
    pairs = set(sc.locked)
    locks = {
        (lock["provider"], lock["connectionId"], lock["model"]): {
            name: lock.get(name) for name in LOCK_FIELDS
        }
        for lock in reader.get("/api/resilience/model-cooldowns")["items"]
        if (lock["provider"], lock["connectionId"], lock["model"]) in pairs
    }
    leases = {
        owner: _lease_status(reader.url, sc.managed_key, owner, generation)
        for owner, generation in sc.owners.items()
    }
    return Snapshot(breakers, connections, locks, leases)


def _differ(problems: list[str], what: str, before: Any, after: Any) -> int:
    if before != after:
        problems.append(f"{what}: before the kill {before!r}, after the restart {after!r}")
    return 1


def _sanity(before: Snapshot, sc: Scenario, problems: list[str]) -> None:
    """The state the run meant to create exists before the kill (else the check is void)."""
    if before.breaker_state(sc.breakers[0]) != "open":
        problems.append(f"breaker {sc.breakers[0]} not open before the kill: {before.breakers}")
    if before.breaker_state(sc.breakers[1]) == "open":  # it must open on the last call only
        problems.append(f"breaker {sc.breakers[1]} open too early: {before.breakers}")
    cooled = before.connections.get(sc.cooled, {})
    if cooled.get("test_status") != "unavailable" or not cooled.get("rate_limited_until"):
        problems.append(f"connection {sc.cooled} not cooling before the kill: {cooled}")
    terminal = before.connections.get(sc.terminal, {})
    if terminal.get("test_status") != "expired":
        problems.append(f"connection {sc.terminal} not terminal before the kill: {terminal}")
    for pair in sc.locked:
        if pair not in before.locks:
            problems.append(f"pair {pair} not locked before the kill")
    if len(before.leases) != 2 or any("status" in lease for lease in before.leases.values()):
        problems.append(f"leases before the kill: {before.leases}")
    held = [lease.get("connection") for lease in before.leases.values()]
    if len({repr(h) for h in held}) != len(held):
        problems.append(f"two leases on one connection before the kill: {held}")


def compare(before: Snapshot, after: Snapshot, sc: Scenario, problems: list[str]) -> int:
    """Record in ``problems`` what changed across the restart; how many things were compared."""
    _sanity(before, sc, problems)
    checked = _differ(
        problems,
        f"breaker {sc.breakers[0]}",
        before.breakers.get(sc.breakers[0]),
        after.breakers.get(sc.breakers[0]),
    )
    checked += _differ(
        problems,
        f"breaker {sc.breakers[1]} (opened just before the kill)",
        "open",
        after.breaker_state(sc.breakers[1]),
    )
    for connection, state in before.connections.items():
        checked += _differ(
            problems, f"connection {connection}", state, after.connections.get(connection)
        )
    for pair, lock in before.locks.items():
        checked += _differ(problems, f"model lock {pair}", lock, after.locks.get(pair))
    for owner, lease in before.leases.items():
        checked += _differ(problems, f"lease {owner[:10]}…", lease, after.leases.get(owner))
    return checked


@dataclass(frozen=True, slots=True)
class LeaseRows:
    active: int  # ACTIVE rows of the run's lease connections
    duplicated: list[tuple[int, int]]  # (connection, ACTIVE rows) where more than one


ACTIVE_SQL = (
    "SELECT connection_id, COUNT(*) FROM exclusive_connection_leases "
    "WHERE state = 'ACTIVE' GROUP BY connection_id"
)


def lease_rows(env: dict[str, str], data_dir: str, sc: Scenario) -> LeaseRows:
    """The ACTIVE lease rows per connection, read straight from the database."""
    url = env.get("DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url.replace("postgres://", "postgresql://", 1)) as pg:
            rows = pg.execute(ACTIVE_SQL).fetchall()
    else:
        with sqlite3.connect(Path(data_dir) / "omniroute.sqlite3") as lite:
            rows = lite.execute(ACTIVE_SQL).fetchall()
    counts = {int(connection): int(count) for connection, count in rows}
    mine = {c: n for c, n in counts.items() if c in sc.lease_connections}
    return LeaseRows(sum(mine.values()), [(c, n) for c, n in counts.items() if n > 1])
