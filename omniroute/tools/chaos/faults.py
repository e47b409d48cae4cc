"""The chaos run's fault mix, its seeded schedule and the success bound it allows (pure).

Every upstream call the gateway makes takes the next entry of the schedule (the fake upstream's
``/_fake/script`` FIFO queue), so each call independently carries fault ``f`` with probability
``f.share``: the schedule is a pure function of the seed. A *pre-commit* fault (reset, timeout,
503, 429 before any byte of the answer) lets the gateway retry or fail over; a *mid-answer*
fault (a reset, a cut or a stall after part of the answer) does too on a plain JSON answer
(the gateway holds the whole body), but on a stream whose first content has gone to the client
the gateway can only surface it as an in-band error.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

CHUNKS: Final = 20  # the fake's default: a complete answer has CHUNKS * CHUNK_SIZE characters
CHUNK_SIZE: Final = 8
RETRY_AFTER_SECONDS: Final = 1
LATENCY_SHARE: Final = 0.10  # calls that answer normally, but late
LATENCY_MS: Final = (50, 400)

Knobs = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fault:
    """One kind of injected failure; ``share`` of all upstream calls carry it."""

    name: str
    share: float
    knobs: Callable[[random.Random], Knobs]
    mid_answer: bool = False  # after part of the answer: unrecoverable once a stream commits


def _mid(action: str, value: str) -> Callable[[random.Random], Knobs]:
    # At least one content chunk goes out first: a stream has then committed to the client.
    return lambda rng: {action: value, "mid_at": rng.randint(1, CHUNKS - 1)}


FAULTS: Final = (
    Fault("reset before the answer", 0.04, lambda rng: {"reset": "before"}),
    Fault("timeout before the answer (stall)", 0.03, lambda rng: {"stall": "before"}),
    Fault("503", 0.05, lambda rng: {"status": 503}),
    Fault(
        f"429 with Retry-After: {RETRY_AFTER_SECONDS}",
        0.04,
        lambda rng: {"status": 429, "retry_after": str(RETRY_AFTER_SECONDS)},
    ),
    Fault("reset mid-answer", 0.03, _mid("reset", "mid"), mid_answer=True),
    Fault("cut mid-answer", 0.03, _mid("cut", "mid"), mid_answer=True),
    Fault("stalled mid-answer", 0.03, _mid("stall", "mid"), mid_answer=True),
)
FAULT_RATE: Final = sum(f.share for f in FAULTS)  # p: any fault on one call
MID_RATE: Final = sum(f.share for f in FAULTS if f.mid_answer)  # q: of which mid-answer


def draw(rng: random.Random) -> tuple[str, Knobs]:
    """One call's fault (its name and fake knobs), or ``latency``/``healthy``."""
    u = rng.random()
    for fault in FAULTS:
        if u < fault.share:
            return fault.name, fault.knobs(rng)
        u -= fault.share
    if rng.random() < LATENCY_SHARE:
        return "latency", {"latency_ms": rng.randint(*LATENCY_MS)}
    return "healthy", {}


def schedule(seed: int, calls: int) -> list[tuple[str, Knobs]]:
    """The first ``calls`` upstream calls' faults for ``seed``: the same list every time."""
    rng = random.Random(seed)
    return [draw(rng) for _ in range(calls)]


def digest(entries: list[tuple[str, Knobs]]) -> str:
    """A short fingerprint of a schedule, to show that two runs injected the same faults."""
    text = repr([knobs for _, knobs in entries]).encode()
    return hashlib.sha256(text).hexdigest()[:12]


def success_bound(targets: int, stream: bool, p: float = FAULT_RATE, q: float = MID_RATE) -> float:
    """The least expected success rate of a request with ``targets`` independent targets when
    each call fails with probability ``p``, ``q`` of it mid-answer.

    A JSON request fails only if every target fails: ``1 − p^k``. A stream fails when every
    target fails before the answer (``p − q`` each), or when the call it commits to fails
    mid-answer: it commits to the first call that is not a pre-commit failure, which succeeds
    with probability ``(1 − p) / (1 − p + q)``, so ``(1 − p) / (1 − p + q) · (1 − (p − q)^k)``.
    Retries on the same target only add calls, so they only raise the rate.
    """
    if not stream:
        return 1.0 - p**targets
    return (1.0 - p) / (1.0 - p + q) * (1.0 - (p - q) ** targets)


def margin(bound: float, n: int, sigmas: float = 3.0) -> float:
    """How far below ``bound`` a measured rate over ``n`` requests may fall by chance."""
    return sigmas * math.sqrt(bound * (1.0 - bound) / n) if n else 0.0
