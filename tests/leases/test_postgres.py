"""Leases across gateway processes on PostgreSQL: two processes of ten threads each race for
one connection, or one owner, and the database lets exactly one win at a time.

Each test makes a database of its own (migrated for the lease table only) and drops it after.
The server is the CI pass's ``DATABASE_URL`` when that is PostgreSQL, else ``CI_DATABASE_URL``,
else 127.0.0.1:5432; without one the tests skip (and fail when CI=true).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import require_service
from tests.databases import create_database, drop_database, is_postgres, unique_database_name

pytestmark = pytest.mark.postgres

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 2
THREADS = 10
TIMEOUT_SECONDS = 180


def _server_url() -> str:
    """A URL of the PostgreSQL server."""
    url = os.environ.get("DATABASE_URL", "")
    if not is_postgres(url):
        url = os.environ.get("CI_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    return url


@pytest.fixture
def race_database() -> Iterator[str]:
    """The URL of a new database holding only the lease table; dropped afterwards."""
    server, name = _server_url(), unique_database_name("lease_race")
    try:
        url = create_database(server, name)
    except psycopg.OperationalError as error:
        require_service(f"PostgreSQL at {server}", error)
    try:
        _manage(url, "migrate", "leases", "--noinput")
        yield url
    finally:
        drop_database(server, name)


def _environment(url: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "omniroute.settings"}


def _manage(url: str, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_ROOT,
        env=_environment(url),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stderr


def _race(url: str, mode: str) -> list[str]:
    """Start the worker processes, let them go at once, and gather every outcome."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.leases.race_worker", mode, str(n + 1), str(THREADS)],
            cwd=PROJECT_ROOT,
            env=_environment(url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
        outputs = [worker.communicate("go\n", timeout=TIMEOUT_SECONDS) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:  # a worker that never got going
                worker.kill()
                worker.wait()
    for worker, (_, errors) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, errors
    return [outcome for out, _ in outputs for outcome in json.loads(out.splitlines()[-1])]


def _rows(url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def test_twenty_acquires_of_one_connection_from_two_processes(race_database: str) -> None:
    outcomes = Counter(_race(race_database, "connection"))

    assert sum(outcomes.values()) == PROCESSES * THREADS
    assert outcomes["ACQUIRED"] == 1, outcomes
    assert outcomes["CONNECTION_BUSY"] + outcomes["OWNER_ALREADY_ACTIVE"] == 19, outcomes
    assert _rows(race_database, "SELECT state, connection_id FROM exclusive_connection_leases") == [
        ("ACTIVE", 1)
    ]


def test_one_owner_racing_from_two_processes_never_reuses_a_generation(
    race_database: str,
) -> None:
    outcomes = Counter(_race(race_database, "owner"))

    generations = [
        generation
        for (generation,) in _rows(
            race_database, "SELECT generation FROM exclusive_connection_leases ORDER BY id"
        )
    ]
    assert set(outcomes) <= {"ACQUIRED", "OWNER_ALREADY_ACTIVE"}, outcomes
    assert outcomes["ACQUIRED"] == len(generations) >= 1
    assert generations == list(range(1, len(generations) + 1))  # each once, in order
    assert _rows(
        race_database, "SELECT count(*) FROM exclusive_connection_leases WHERE state = 'ACTIVE'"
    ) == [(0,)]
