"""A test run writes only to databases and Redis key prefixes it made, and removes them.

The PostgreSQL and Redis cases use the CI pass's ``DATABASE_URL`` / ``REDIS_URL`` servers (else
127.0.0.1); without them they skip, and fail when CI=true.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from redis.exceptions import RedisError

from tests.conftest import require_service
from tests.databases import (
    create_database,
    database_exists,
    delete_keys,
    drop_database,
    is_postgres,
    redis_prefix,
    run_key_patterns,
    suite_redis_url,
    unique_database_name,
)

ROOT = Path(__file__).resolve().parents[1]
PROBE = "tests/e2e/isolation_probe.py"
# The probe's test database needs its tables, not the migrations' history: made faster.
PROBE_OPTIONS = ("-q", "-p", "no:cacheprovider", "--no-migrations")
PROBE_TIMEOUT_SECONDS = 300
SETTINGS_PROBE = (
    "import omniroute.settings_test as s; "
    "print(s.DATABASES['default'].get('TEST', {}).get('NAME'), s.REDIS_PREFIX)"
)


@pytest.fixture
def pg_server() -> str:
    """A URL of the PostgreSQL server the run uses (skip without one; fail when CI=true)."""
    url = os.environ.get("DATABASE_URL", "")
    if not is_postgres(url):
        url = os.environ.get("CI_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        database_exists(url, "postgres")
    except psycopg.OperationalError as error:
        require_service(f"PostgreSQL at {url}", error)
    return url


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    """A client of the run's Redis (skip without one; fail when CI=true)."""
    client = redis.Redis.from_url(suite_redis_url(), socket_connect_timeout=2)
    try:
        client.ping()
    except (RedisError, OSError) as error:
        client.close()
        require_service(f"Redis at {suite_redis_url()}", error)
    yield client
    client.close()


def _settings_in_a_new_process(**variables: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMNIROUTE_REDIS_PREFIX"}
    env.update(variables)
    argv = [sys.executable, "-c", SETTINGS_PROBE]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_each_run_names_its_own_test_database_and_redis_prefix() -> None:
    url = "postgres://postgres@127.0.0.1:5432/test"
    first = _settings_in_a_new_process(DATABASE_URL=url)
    second = _settings_in_a_new_process(DATABASE_URL=url)

    assert first[0].startswith("test_omniroute_") and second[0].startswith("test_omniroute_")
    assert first[1].startswith("omniroute-test-") and first[1].endswith(":")
    assert first[0] != second[0] and first[1] != second[1]


def test_a_given_redis_prefix_is_the_runs() -> None:
    given = _settings_in_a_new_process(OMNIROUTE_REDIS_PREFIX="omniroute-ci-42:")
    assert given[1] == "omniroute-ci-42:"


def test_a_database_is_created_and_dropped_with_a_connection_still_open(pg_server: str) -> None:
    name = unique_database_name("probe")
    url = create_database(pg_server, name)
    leftover = psycopg.connect(url)  # a gateway process that did not close its connection
    try:
        leftover.execute("CREATE TABLE t (n int)")
        leftover.commit()
        assert database_exists(pg_server, name)

        drop_database(pg_server, name)

        assert not database_exists(pg_server, name)
    finally:
        leftover.close()
        drop_database(pg_server, name)


def test_the_cleanup_deletes_its_prefixes_keys_and_no_other(client: redis.Redis) -> None:
    run = redis_prefix("run")  # a run's prefix (under this run's, so it is swept anyway)
    root = run.rstrip(":")
    own = [f"{run}r:a", f"{run}asgi:group", f"{root}-e2e-1a2b:r:b", f"{root}-t-3c4d:w:c"]
    others = [f"{root}0:r:a", f"{root}x-t-1:r:a", f"{redis_prefix('other')}r:a"]
    for key in own + others:
        client.set(key, 1)
    try:
        deleted = delete_keys(suite_redis_url(), run_key_patterns(run))

        assert deleted == len(own)
        assert client.exists(*own) == 0
        assert client.exists(*others) == len(others)
    finally:
        client.delete(*own, *others)


def test_the_cleanup_escapes_pattern_characters(client: redis.Redis) -> None:
    run = redis_prefix("a*b")
    other = run.replace("a*b", "aXb")
    client.set(f"{run}k", 1)
    client.set(f"{other}k", 1)
    try:
        assert delete_keys(suite_redis_url(), run_key_patterns(run)) == 1
        assert client.exists(f"{other}k") == 1
    finally:
        client.delete(f"{run}k", f"{other}k")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_run_removes_its_databases_and_keys(
    pg_server: str, client: redis.Redis, tmp_path: Path
) -> None:
    # given: a run of its own (a gateway and a database test) on the same servers
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "OMNIROUTE_REDIS_PREFIX"}
    env.update(
        DATABASE_URL=pg_server, REDIS_URL=suite_redis_url(), OMNIROUTE_PROBE_REPORT=str(report)
    )
    argv = [sys.executable, "-m", "pytest", *PROBE_OPTIONS, PROBE]

    # when
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS
    )

    # then: it saw them while it ran, and left none behind
    assert done.returncode == 0, done.stdout + done.stderr
    made = json.loads(report.read_text())
    try:
        assert made["databases"][0] != "test_test"
        assert [database_exists(pg_server, name) for name in made["databases"]] == [False, False]
        leftover = [k for p in made["prefixes"] for k in client.scan_iter(match=f"{p}*")]
        assert leftover == []
    finally:  # a failed cleanup is reported above, not left on the servers
        for name in made["databases"]:
            drop_database(pg_server, name)
        for prefix in made["prefixes"]:
            delete_keys(suite_redis_url(), run_key_patterns(prefix))
