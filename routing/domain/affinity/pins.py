"""Session affinity: a client session stays on the provider account that
last answered it (pure; the clock is passed in).

A **pin** ties one session to one connection of one provider: when it was made, when the
session last used it, and when it expires. Each use slides the expiry ``ttl`` ahead, so a pin
lasts as long as its session keeps asking. It is a soft preference: the pinned connection is
tried first, and when it is skipped or fails, the next target answers and the pin moves there.

Choosing a connection for a session without a live pin: the least recently used, in
this order: when neither was ever used, the lower ``priority``; a never-used connection before
a used one; the older ``lastUsedAt``; the fewer ``consecutiveUseCount``; the lower
``priority``; then the plan's order. A connection's ``consecutiveUseCount`` counts the
requests a pin sent it in a row: a fresh choice sets it to 1, each pinned request adds one.

Where the choice goes: within each step of the plan (a step of one provider and one model),
the chosen connection moves to the first of the positions that step's targets hold. Targets
never move from one step to another, so a combo's declared fail-over order stays as it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from omniroute.core.digest import sha256_hex
from routing.domain.config.vocabulary import Strategy
from routing.domain.plan.planning import Target

OWNS_ORDERING = frozenset(
    {
        Strategy.CACHE_OPTIMIZED,
        Strategy.QUOTA_SHARE,
        Strategy.ROUND_ROBIN,
        Strategy.STRICT_RANDOM,
        Strategy.FUSION,
        Strategy.PIPELINE,
        Strategy.RESET_AWARE,
        Strategy.HEADROOM,
        Strategy.RESET_WINDOW,
        Strategy.AUTO,
    }
)
"""Strategies whose order is their point (a rotation, a hash, a score, a panel): affinity
leaves their requests alone."""


def pin_hash(provider: str, session: str) -> str:
    """The name of a session's pin at ``provider``: SHA-256 of ``<provider>:<session>`` (the
    raw session id is never stored)."""
    return sha256_hex(f"{provider}:{session}".encode())


@dataclass(frozen=True, slots=True)
class Pin:
    """One session's connection at one provider; times in epoch seconds. ``saved_at``: when
    its durable copy was last written (``None``: never)."""

    connection_id: int
    created_at: float
    last_used_at: float
    expires_at: float
    saved_at: float | None = None

    def live(self, now: float, ttl_seconds: float) -> bool:
        """Not expired, under the current TTL too (an operator may have shortened it)."""
        return now < min(self.expires_at, self.last_used_at + ttl_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "connectionId": self.connection_id,
            "createdAt": self.created_at,
            "lastUsedAt": self.last_used_at,
            "expiresAt": self.expires_at,
            "savedAt": self.saved_at,
        }

    @classmethod
    def from_dict(cls, raw: object) -> Pin | None:
        """The pin of a stored record; ``None`` when it is not one."""
        if not isinstance(raw, Mapping):
            return None
        connection = raw.get("connectionId")
        if not isinstance(connection, int) or isinstance(connection, bool):
            return None
        created, used, expires = (
            _time(raw.get(n)) for n in ("createdAt", "lastUsedAt", "expiresAt")
        )
        if created is None or used is None or expires is None:
            return None
        return cls(connection, created, used, expires, _time(raw.get("savedAt")))


def _time(value: object) -> float | None:
    """A finite number of epoch seconds, else ``None``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def live_pin(raw: object, now: float, ttl_seconds: float) -> Pin | None:
    """The stored pin while it lasts; ``None`` when absent, malformed or expired."""
    pin = Pin.from_dict(raw)
    return pin if pin is not None and pin.live(now, ttl_seconds) else None


def pin_after_answer(
    current: Pin | None, connection_id: int, now: float, ttl_seconds: float
) -> Pin:
    """The pin once ``connection_id`` answered the session: the live pin to it slid forward
    (its ``created_at`` kept), else a new pin (the session moved, or starts here)."""
    if current is not None and current.connection_id == connection_id:
        if current.live(now, ttl_seconds):
            return replace(current, last_used_at=now, expires_at=now + ttl_seconds)
    return Pin(connection_id, now, now, now + ttl_seconds)


def write_due(before: Pin | None, after: Pin, now: float, interval_seconds: float) -> bool:
    """Whether the durable copy of ``after`` should be written now: a new or moved pin always,
    a slid one once ``interval_seconds`` have passed since the last write."""
    if before is None or before.connection_id != after.connection_id:
        return True
    return before.saved_at is None or now - before.saved_at >= interval_seconds


@dataclass(frozen=True, slots=True)
class Usage:
    """When a connection was last chosen for a session, and how many times in a row a pin
    chose it."""

    last_used_at: float | None = None
    consecutive_use_count: int = 0


NEVER_USED = Usage()


def lru_choice(candidates: Sequence[tuple[int, int]], usage: Mapping[int, Usage]) -> int:
    """The least recently used of ``candidates`` ((connection id, priority), in plan order),
    by the order in the module docstring. ``candidates`` must not be empty."""

    def rank(item: tuple[int, tuple[int, int]]) -> tuple[int, float, float, int, int]:
        index, (connection, priority) = item
        used = usage.get(connection, NEVER_USED)
        if used.last_used_at is None:
            return 0, priority, 0, 0, index
        return 1, used.last_used_at, used.consecutive_use_count, priority, index

    return min(enumerate(candidates), key=rank)[1][0]


def usage_after_choice(
    usage: Mapping[int, Usage], connection_id: int, now: float, *, pinned: bool
) -> dict[int, Usage]:
    """The usage once ``connection_id`` was chosen at ``now``: by the session's pin (one more
    use in a row), or afresh (the first)."""
    before = usage.get(connection_id, NEVER_USED)
    count = before.consecutive_use_count + 1 if pinned else 1
    return {**usage, connection_id: Usage(now, count)}


def usage_from_json(raw: object) -> dict[int, Usage]:
    """A provider's usage record (``{"<connection id>": [lastUsedAt, count]}``); what is not
    well-formed is left out."""
    found: dict[int, Usage] = {}
    for key, value in raw.items() if isinstance(raw, Mapping) else ():
        if not (isinstance(key, str) and key.isdigit() and isinstance(value, list | tuple)):
            continue
        used = _time(value[0]) if len(value) == 2 else None
        if used is not None and isinstance(value[1], int):
            found[int(key)] = Usage(used, value[1])
    return found


def usage_to_json(usage: Mapping[int, Usage], now: float, keep_seconds: float) -> dict[str, Any]:
    """The record of ``usage``, without the connections unused for ``keep_seconds``."""
    return {
        str(connection): [used.last_used_at, used.consecutive_use_count]
        for connection, used in usage.items()
        if used.last_used_at is not None and now - used.last_used_at < keep_seconds
    }


def provider_candidates(targets: Sequence[Target]) -> dict[str, list[tuple[int, int]]]:
    """Each provider of the plan with its connections ((id, priority)), in plan order, once."""
    found: dict[str, dict[int, int]] = {}
    for target in targets:
        found.setdefault(target.provider.slug, {})[target.connection.id] = (
            target.connection.priority
        )
    return {provider: list(connections.items()) for provider, connections in found.items()}


def with_first(targets: Sequence[Target], provider: str, connection_id: int) -> tuple[Target, ...]:
    """``targets`` with ``connection_id`` first within each step of ``provider`` that has it:
    a step's targets (one provider, one model) keep the positions they hold, and only trade
    places among themselves."""
    steps: dict[tuple[int, str], list[int]] = {}
    for index, target in enumerate(targets):
        if target.provider.slug == provider:
            steps.setdefault((target.step, target.model), []).append(index)
    ordered = list(targets)
    for positions in steps.values():
        group = [targets[i] for i in positions]
        chosen = [t for t in group if t.connection.id == connection_id]
        if not chosen or group[0] is chosen[0]:
            continue
        rest = [t for t in group if t.connection.id != connection_id]
        for position, target in zip(positions, chosen + rest, strict=True):
            ordered[position] = target
    return tuple(ordered)
