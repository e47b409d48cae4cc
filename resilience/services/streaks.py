"""Request-rejected streaks in the state store (one atomic update per refusal)."""

from __future__ import annotations

from dataclasses import dataclass

from omniroute.core.store import Json, StateStore
from resilience.domain.streak import STALE_AFTER_SECONDS, Streak, StreakDecision, on_refusal

STREAK_PREFIX = "streak:"


def streak_key(connection_id: int) -> str:
    return f"{STREAK_PREFIX}{connection_id}"


@dataclass(slots=True)
class _Seen:
    decision: StreakDecision | None = None


async def streak_record_refusal(*, store: StateStore, connection_id: int) -> StreakDecision:
    """Count one refusal of the connection and say what it means."""
    now = store.clock()
    seen = _Seen()

    def updater(raw: Json | None) -> Json | None:
        current = Streak.from_dict(raw) if isinstance(raw, dict) else None
        after, seen.decision = on_refusal(current, now)
        return after.to_dict() if after is not None else None

    await store.update(streak_key(connection_id), updater, ttl=STALE_AFTER_SECONDS)
    assert seen.decision is not None
    return seen.decision


async def streak_clear(*, store: StateStore, connection_id: int) -> None:
    """A success (or an operator reset) ends the streak."""
    await store.delete(streak_key(connection_id))
