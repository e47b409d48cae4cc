"""The per-target combo metrics that p2c and least-used read
(``routing.proxy.guards.combo_metrics``),
and p2c driven by them as a gateway drives it: one request at a time, each recorded before the
next is ordered."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from routing.proxy.guards.combo_metrics import updated
from routing.strategies.keys import execution_key
from routing.strategies.metrics.orders import TargetMetrics, p2c
from tests.routing.test_ordering import A, B, C

TARGETS = (A, B, C)


def metrics_of(records: dict[str, dict[str, Any]]) -> dict[str, TargetMetrics]:
    return {
        key: TargetMetrics(
            100.0 * record["ok"] / record["count"],
            record["latency_ms"],
            count=int(record["count"]),
            age_seconds=0.1,
        )
        for key, record in records.items()
    }


def served(latencies_ms: Sequence[Sequence[int]], seed: int, requests: int) -> list[str]:
    """Which target answered each of ``requests`` sequential p2c requests, target i answering
    its n-th request in ``latencies_ms[i][n % len]`` milliseconds."""
    rng = random.Random(seed)
    records: dict[str, dict[str, Any]] = {}
    answered: list[str] = []
    for _ in range(requests):
        first = p2c(TARGETS, rng, metrics_of(records))[0]
        key, index = execution_key(first), TARGETS.index(first)
        samples = latencies_ms[index]
        latency = samples[answered.count(key) % len(samples)]
        records[key] = updated(records.get(key), True, latency, now=0.0)
        answered.append(key)
    return answered


def never_two_apart(answered: list[str]) -> bool:
    running: Counter[str] = Counter({execution_key(t): 0 for t in TARGETS})
    for key in answered:
        running[key] += 1
        if max(running.values()) - min(running.values()) > 1:
            return False
    return True


@pytest.mark.parametrize("seed", range(8))
def test_sub_millisecond_answers_leave_healthy_targets_a_tie(seed: int) -> None:
    # A local upstream answers within the millisecond: most samples read 0 ms, a few 1 ms.
    latencies = ([0], [0], [0, 0, 0, 1])

    assert never_two_apart(served(latencies, seed, 300))


@pytest.mark.parametrize("seed", range(8))
def test_a_pause_of_the_machine_does_not_make_a_healthy_target_slow(seed: int) -> None:
    latencies = ([3], [3, 3, 3, 3, 3, 3, 1_500], [3])  # one 1.5 s stall in seven answers

    assert never_two_apart(served(latencies, seed, 300))


@pytest.mark.parametrize("seed", range(4))
def test_a_target_five_times_slower_gets_clearly_less(seed: int) -> None:
    shares = Counter(served(([40], [40], [200]), seed, 300))

    # it is tried until measured (5 requests), then loses every pair it is drawn into
    assert shares[execution_key(C)] <= 15
    assert min(shares[execution_key(A)], shares[execution_key(B)]) >= 105


def test_every_success_is_a_latency_sample_and_a_spike_is_capped() -> None:
    record = updated(None, True, 0, now=1.0)
    assert record == {"count": 1, "ok": 1, "latency_ms": 0.0, "at": 1.0}
    record = updated(record, True, 5_000)  # capped at 4 x 0 + 10 ms
    assert record["latency_ms"] == pytest.approx(2.0)
    record = updated(record, False, 0)
    assert (record["count"], record["ok"], record["latency_ms"]) == (3, 2, pytest.approx(2.0))


def test_a_target_that_stays_slow_reaches_its_latency() -> None:
    record = updated(None, True, 10)
    for _ in range(40):
        record = updated(record, True, 1_000)
    assert record["latency_ms"] == pytest.approx(1_000, rel=0.02)
