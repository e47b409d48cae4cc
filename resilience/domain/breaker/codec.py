"""JSON forms of breaker values: tolerant decoding and the status object's pieces (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeGuard, TypeVar

from resilience.domain.breaker.state import BreakerState, Transition

HISTORY_LIMIT = 20  # transitions kept per breaker

_E = TypeVar("_E", bound=StrEnum)


def str_or_none(value: StrEnum | None) -> str | None:
    return None if value is None else str(value)


def ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def transition_to_dict(step: Transition) -> dict[str, Any]:
    return {
        "from": str(step.from_state),
        "to": str(step.to_state),
        "at": step.at,
        "failure_count": step.failure_count,
        "reason": step.reason,
    }


def transition_status(step: Transition) -> dict[str, Any]:
    return {
        "from": str(step.from_state),
        "to": str(step.to_state),
        "timestamp": ms(step.at),
        "failureCount": step.failure_count,
        "reason": step.reason,
    }


def enum_or_none(kind: type[_E], raw: object) -> _E | None:
    if not isinstance(raw, str):
        return None
    try:
        return kind(raw)
    except ValueError:
        return None


def _is_number(raw: object) -> TypeGuard[int | float]:
    return isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)


def count(raw: object) -> int:
    return max(0, int(raw)) if _is_number(raw) else 0


def time_or_none(raw: object) -> float | None:
    return float(raw) if _is_number(raw) else None


def counts(raw: object) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(key): count(value) for key, value in raw.items() if count(value) > 0}


def transitions_from(raw: object) -> tuple[Transition, ...]:
    if not isinstance(raw, list | tuple):
        return ()
    steps = (_transition_from(item) for item in raw if isinstance(item, Mapping))
    return tuple(step for step in steps if step is not None)[-HISTORY_LIMIT:]


def _transition_from(item: Mapping[str, Any]) -> Transition | None:
    from_state = enum_or_none(BreakerState, item.get("from"))
    to_state = enum_or_none(BreakerState, item.get("to"))
    at = time_or_none(item.get("at"))
    if from_state is None or to_state is None or at is None:
        return None
    reason = item.get("reason")
    return Transition(from_state, to_state, at, count(item.get("failure_count")), str(reason))
