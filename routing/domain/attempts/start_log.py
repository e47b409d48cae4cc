"""The start log of one connection's request queue (pure): the rate window and the spacing.

The log is the record the state store keeps per queued connection, shared by every process
(``routing.proxy.admission.limiter``): recent starts as entries ``[first, last, count]``, oldest
first. :func:`decide` tells whether a request may start now, given the log and the limits, and
returns the log with that start added.

The rate window is **sliding**: at most ``per_minute`` starts in any 60 s (not a reservoir
refilled every 60 s, which allows up to twice the rate across a refill). A start counts until
60 s after it. To keep the record small at any rate, starts less than :data:`MERGE_SECONDS`
after an entry's first start join that entry, and the whole entry counts until 60 s after its
latest start: a burst may wait up to :data:`MERGE_SECONDS` longer than an exact log would let
it, never less. The latest start is always kept, for ``min_time`` (the least time between two
starts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WINDOW_SECONDS = 60.0
MERGE_SECONDS = 0.5

Entry = list[float]  # [first start, last start, count]


@dataclass(frozen=True, slots=True)
class StartDecision:
    """``wait`` 0: the start is granted and ``log`` holds it; else the seconds until the
    limits may allow it (``log`` is the old one, with expired entries dropped)."""

    wait: float
    log: list[Entry]


def _entries(raw: object) -> list[Entry]:
    """The stored log, oldest first; anything malformed is ignored."""
    if not isinstance(raw, list):
        return []
    entries: list[Entry] = []
    for item in raw:
        if (
            isinstance(item, list)
            and len(item) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in item)
        ):
            entries.append([float(item[0]), float(item[1]), float(item[2])])
    return entries


def decide(raw: object, now: float, *, per_minute: int, min_time_seconds: float) -> StartDecision:
    """Whether a request may start at ``now`` (limits of 0 do not apply)."""
    entries = _entries(raw)
    latest = max((e[1] for e in entries), default=-math.inf)
    live = [e for e in entries if e[1] + WINDOW_SECONDS > now]
    if not live and entries:
        live = [max(entries, key=lambda e: e[1])]  # the latest start, for the spacing
    wait = max(0.0, latest + min_time_seconds - now) if min_time_seconds else 0.0
    if per_minute:
        counted = [e for e in live if e[1] + WINDOW_SECONDS > now]
        excess = sum(e[2] for e in counted) - (per_minute - 1)
        for entry in counted:  # oldest first: when enough of them have left, one may start
            if excess <= 0:
                break
            excess -= entry[2]
            wait = max(wait, entry[1] + WINDOW_SECONDS - now)
    if wait > 0:
        return StartDecision(wait, live)
    last = live[-1] if live else None
    if last is not None and last[1] + WINDOW_SECONDS > now and now - last[0] < MERGE_SECONDS:
        grown = [*live[:-1], [last[0], max(last[1], now), last[2] + 1]]
        return StartDecision(0.0, grown)
    kept = [e for e in live if e[1] + WINDOW_SECONDS > now]
    return StartDecision(0.0, [*kept, [now, now, 1.0]])


def record_ttl(min_time_seconds: float) -> float:
    """How long the log must outlive its latest start."""
    return max(WINDOW_SECONDS, min_time_seconds) + 1.0
