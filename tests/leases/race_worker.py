"""One gateway process's share of the PostgreSQL lease races (``test_postgres.py``).

Run as ``python -m tests.leases.race_worker MODE WORKER THREADS`` from the project root with
``DATABASE_URL`` set. Every thread opens its database connection, then all wait until the parent
writes a line on stdin (after every process printed ``ready``), so the two processes start
together. Prints one JSON line: the outcomes, in no particular order.

- ``connection``: each thread acquires connection 1 for an owner of its own.
- ``owner``: each thread acquires, for the one shared owner, a connection of its own, and
  releases the lease when it got it; ``ROUNDS`` times.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute.settings")
django.setup()

from django.db import connection  # noqa: E402

from leases.domain.states import LeaseOutcome  # noqa: E402
from leases.domain.tokens import owner_hash  # noqa: E402
from leases.services import lease_acquire, lease_release  # noqa: E402

SHARED_OWNER = owner_hash("vlo_" + "s" * 43)
ROUNDS = 5
BARRIER_TIMEOUT_SECONDS = 60


def one_connection(worker: int, thread: int) -> list[str]:
    owner = owner_hash(f"vlo_{worker:03d}{thread:03d}" + "o" * 37)
    result = lease_acquire(owner_hash=owner, api_key_id=worker, provider="p", connection_id=1)
    return [result.outcome.value]


def one_owner(worker: int, thread: int) -> list[str]:
    outcomes = []
    for _ in range(ROUNDS):
        result = lease_acquire(
            owner_hash=SHARED_OWNER,
            api_key_id=1,
            provider="p",
            connection_id=worker * 1000 + thread,
        )
        outcomes.append(result.outcome.value)
        if result.outcome is LeaseOutcome.ACQUIRED and result.lease is not None:
            lease_release(owner_hash=SHARED_OWNER, generation=result.lease.generation, api_key_id=1)
    return outcomes


def main(mode: str, worker: int, threads: int) -> None:
    job = {"connection": one_connection, "owner": one_owner}[mode]
    start = threading.Barrier(threads + 1, timeout=BARRIER_TIMEOUT_SECONDS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def run(thread: int) -> None:
        connection.ensure_connection()
        start.wait()
        try:
            done = job(worker, thread)
        except Exception as error:  # reported to the parent, which fails the test
            done = [f"error {type(error).__name__}: {error}"]
        finally:
            connection.close()
        with lock:
            outcomes.extend(done)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    print("ready", flush=True)
    sys.stdin.readline()
    start.wait()
    for thread in pool:
        thread.join()
    print(json.dumps(outcomes), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
