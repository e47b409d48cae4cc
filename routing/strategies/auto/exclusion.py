"""The ``auto`` strategy's exclusions of poor targets (pure).

A target of an ``auto`` combo that scores below the threshold (0.2) is left out of the combo's
orderings for a while, longer each time it happens again: the reference excludes it for
5 minutes, doubling on each repeat up to 30 minutes. These are timers the gateway sets itself
for transient reasons, so they are capped at ``availability.transientCooldownCapMs``
(30 s by default): the durations are parameters, and the caller passes
``min(5 min, cap)`` and ``min(30 min, cap)`` (:func:`capped_policy`). With the default cap
both are 30 s, and the progression only matters with a larger cap.

One small record per (combo, target), :class:`ExclusionRecord`: until when it is excluded, how
many times in a row (``level``, 0 the first), and the number of requests the target had served
when it was excluded (``evidence``). Transitions, for one scoring of a target at ``now``:

* no record, score >= threshold: still none;
* no record, score < threshold: excluded for ``duration(0)`` (level 0);
* excluded (``now < until``): unchanged, whatever the score (the timer runs out first);
* expired, score >= threshold: cleared (the level starts again from 0 next time);
* expired, score < threshold, no new evidence since: unchanged. The target is back in the
  ordering, ranked by its score; nothing about it changed while it was out, so it is not
  excluded again on the same evidence: it waits for a request to try it (a probe);
* expired, score < threshold, new evidence: excluded again at the next level.

Whether an exclusion may apply at all (never the last candidate) is the caller's decision
(``routing.strategies.auto.scoring``); times are epoch seconds, passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

DEFAULT_THRESHOLD = 0.2
REFERENCE_BASE_SECONDS = 5 * 60.0  # the reference's first exclusion
REFERENCE_MAX_SECONDS = 30 * 60.0  # and its longest, after doublings


@dataclass(frozen=True, slots=True)
class ExclusionPolicy:
    """How long a poor target is excluded: ``base_seconds`` the first time, doubled on each
    repeat, at most ``max_seconds``; a score below ``threshold`` excludes."""

    base_seconds: float = REFERENCE_BASE_SECONDS
    max_seconds: float = REFERENCE_MAX_SECONDS
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        if not 0 < self.base_seconds <= self.max_seconds:
            raise ValueError("exclusions need 0 < base_seconds <= max_seconds")

    def duration(self, level: int) -> float:
        """Seconds excluded at ``level`` (0 the first time): base x 2^level, capped."""
        if level >= 64:  # 2**64 x any base is past every cap
            return self.max_seconds
        return min(math.ldexp(self.base_seconds, max(0, level)), self.max_seconds)


def capped_policy(cap_seconds: float, *, threshold: float = DEFAULT_THRESHOLD) -> ExclusionPolicy:
    """The reference's durations (5 min, doubling to 30 min) within the cap on
    self-set timers (``availability.transientCooldownCapMs`` in seconds)."""
    cap = max(cap_seconds, 1e-3)
    return ExclusionPolicy(
        min(REFERENCE_BASE_SECONDS, cap), min(REFERENCE_MAX_SECONDS, cap), threshold
    )


@dataclass(frozen=True, slots=True)
class ExclusionRecord:
    """One target's exclusion: until when (epoch seconds), its repeat level, and the requests
    it had served when excluded."""

    until: float
    level: int = 0
    evidence: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"until": self.until, "level": self.level, "evidence": self.evidence}

    @classmethod
    def from_dict(cls, data: Any) -> ExclusionRecord | None:
        """The record a stored value holds, or ``None`` when it holds none (or garbage)."""
        if not isinstance(data, Mapping):
            return None
        until, level, evidence = data.get("until"), data.get("level", 0), data.get("evidence", 0)
        if not _number(until) or not _integer(level) or not _integer(evidence):
            return None
        return cls(float(until), int(level), int(evidence))


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_excluded(record: ExclusionRecord | None, now: float) -> bool:
    """Whether ``record`` keeps its target out at ``now``."""
    return record is not None and now < record.until


def after_score(
    record: ExclusionRecord | None,
    score: float,
    evidence: int,
    now: float,
    policy: ExclusionPolicy,
) -> ExclusionRecord | None:
    """The record after one scoring of its target (see the module docstring); ``evidence``
    is the requests the target has served so far."""
    if is_excluded(record, now):
        return record
    if score >= policy.threshold:
        return None
    if record is None:
        return ExclusionRecord(now + policy.duration(0), 0, evidence)
    if evidence <= record.evidence:
        return record  # no probe yet: not excluded again on the same evidence
    level = record.level + 1
    return ExclusionRecord(now + policy.duration(level), level, evidence)
