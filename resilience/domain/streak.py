"""The request-rejected streak, as pure arithmetic (docs/resilience.md, "Terminal states").

Upstream per-request refusals ("request not allowed") escalate per connection: the first two
consecutive refusals cool the connection for 5 then 15 minutes; the third makes it ``banned``.
A refusal arriving while the streak's cooldown runs was in flight before it and is not counted.
Refusals more than 24 h apart start a new streak; a success clears it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

STALE_AFTER_SECONDS = 24 * 3600.0
COOLDOWN_RUNGS_SECONDS = (300.0, 900.0)
ESCALATE_AT = 3
REFUSAL_SIGNAL = "request not allowed"
REFUSAL_STATUS = 403


@dataclass(frozen=True, slots=True)
class Streak:
    """Consecutive refusals of one connection."""

    count: int
    last_refusal_at: float
    cooldown_until: float

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "last": self.last_refusal_at, "until": self.cooldown_until}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Streak:
        return cls(
            int(data.get("count", 0)), float(data.get("last", 0)), float(data.get("until", 0))
        )


@dataclass(frozen=True, slots=True)
class StreakDecision:
    """What one refusal means for its connection."""

    counted: bool
    escalate: bool
    cooldown_seconds: float
    count: int


def is_refusal(status: int, text: str) -> bool:
    """An upstream per-request refusal (today: 403 "Request not allowed")."""
    return status == REFUSAL_STATUS and REFUSAL_SIGNAL in text.lower()


def on_refusal(streak: Streak | None, now: float) -> tuple[Streak | None, StreakDecision]:
    """The streak after one refusal at ``now`` (None: forgotten, after an escalation)."""
    if streak is not None and now < streak.cooldown_until:
        remaining = streak.cooldown_until - now
        return streak, StreakDecision(False, False, remaining, streak.count)
    fresh = streak is None or now - streak.last_refusal_at >= STALE_AFTER_SECONDS
    count = 1 if fresh or streak is None else streak.count + 1
    if count >= ESCALATE_AT:
        return None, StreakDecision(True, True, 0.0, count)
    cooldown = COOLDOWN_RUNGS_SECONDS[min(count, len(COOLDOWN_RUNGS_SECONDS)) - 1]
    return Streak(count, now, now + cooldown), StreakDecision(True, False, cooldown, count)
