"""Concurrency workload for the state store tests.

Run as ``python -m tests.core.store_worker URL PREFIX WORKER_ID WORKERS`` (from the project
root): waits until ``WORKERS`` workers are ready, then, concurrently, does ``UPDATES`` ``update``
increments of one record, ``INCRS`` ``incr`` of one counter and ``HOLDERS`` semaphore
acquisitions (distinct holders, limit ``LIMIT``) on one key, and prints a JSON line
``{"acquired": n, "update_calls": m}``.  The test module also runs ``run_workload`` in threads.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from omniroute.core.store import Json, RedisStore, StateStore

UPDATES = 300
INCRS = 300
HOLDERS = 50
LIMIT = 10
SEMAPHORE_TTL = 300.0
BARRIER_TIMEOUT = 30.0


async def barrier(store: StateStore, workers: int) -> None:
    """Wait (polling, real time) until ``workers`` participants reached the barrier."""
    await store.incr("ready")
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while await store.get_counter("ready") < workers:
        if time.monotonic() > deadline:
            raise TimeoutError("the other workers never showed up")
        await asyncio.sleep(0.002)


async def run_workload(store: StateStore, worker: int, workers: int) -> dict[str, int]:
    """Run the shared workload; return successful acquisitions and ``fn`` calls."""
    calls = 0

    def plus_one(current: Json | None) -> Json:
        nonlocal calls
        calls += 1
        assert current is None or isinstance(current, int)
        return (current or 0) + 1

    await barrier(store, workers)
    results = await asyncio.gather(
        *(
            store.semaphore_acquire("slots", f"w{worker}-h{i}", limit=LIMIT, ttl=SEMAPHORE_TTL)
            for i in range(HOLDERS)
        ),
        *(store.update("record", plus_one) for _ in range(UPDATES)),
        *(store.incr("counter") for _ in range(INCRS)),
    )
    acquired = sum(1 for granted in results[:HOLDERS] if granted is True)
    return {"acquired": acquired, "update_calls": calls}


async def main(url: str, prefix: str, worker: int, workers: int) -> None:
    store = RedisStore(url, prefix=prefix)
    try:
        print(json.dumps(await run_workload(store, worker, workers)))
    finally:
        await store.close()


if __name__ == "__main__":
    url, prefix, worker, workers = sys.argv[1:5]
    asyncio.run(main(url, prefix, int(worker), int(workers)))
