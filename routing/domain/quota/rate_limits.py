"""A connection's rate-limit overrides, checked and read (pure).

Stored as JSON on the connection: ``rpm``, ``rpd``, ``tpm``, ``tpd``, ``minTime``,
``maxConcurrent``, ``maxWaitMs`` (integers from 0 to their ``INT_BOUNDS``; 0 = use the
default) and ``modelConcurrency`` (model → cap 1..10 000; model names up to 128 characters).
Unknown keys and values out of bounds are refused at write, and a stored value out of bounds is
read as 0 (an integer of a thousand digits would overflow the limiter's arithmetic).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The upper bounds of the integer keys: those of the settings each overrides (requestQueue's
# requestsPerMinute, minTimeBetweenRequestsMs, maxWaitMs; a concurrency cap), and for the
# daily and token counts far above any account's.
INT_BOUNDS: dict[str, int] = {
    "rpm": 1_000_000,
    "rpd": 1_000_000_000,
    "tpm": 10_000_000_000,
    "tpd": 1_000_000_000_000,
    "minTime": 3_600_000,
    "maxConcurrent": 100_000,
    "maxWaitMs": 30_000,
}
INT_KEYS = frozenset(INT_BOUNDS)
MODEL_CONCURRENCY = "modelConcurrency"
MAX_MODEL_CAP = 10_000
MAX_MODEL_KEY = 128


@dataclass(frozen=True, slots=True)
class RateLimitOverrides:
    """The overrides the gateway uses (0: the settings' value applies)."""

    rpm: int = 0
    min_time_ms: int = 0
    max_concurrent: int = 0
    max_wait_ms: int = 0
    model_concurrency: tuple[tuple[str, int], ...] = ()  # (model, cap): hashable, as targets are

    def model_cap(self, model: str) -> int | None:
        """The model's concurrency cap, if it has one."""
        return next((cap for name, cap in self.model_concurrency if name == model), None)


NO_OVERRIDES = RateLimitOverrides()


def check_overrides(value: Any) -> list[str]:
    """What is wrong with ``value`` as stored overrides (empty: nothing)."""
    if not isinstance(value, Mapping):
        return ["must be a JSON object"]
    problems = []
    for key, item in value.items():
        if key in INT_KEYS:
            if type(item) is not int or not 0 <= item <= INT_BOUNDS[key]:
                problems.append(f"{key}: must be an integer 0..{INT_BOUNDS[key]}")
        elif key == MODEL_CONCURRENCY:
            problems += _check_models(item)
        else:
            problems.append(f"{key}: unknown key")
    return problems


def _check_models(item: Any) -> list[str]:
    if not isinstance(item, Mapping):
        return [f"{MODEL_CONCURRENCY}: must be an object of model → cap"]
    problems = []
    for model, cap in item.items():
        if not model or len(model) > MAX_MODEL_KEY:
            problems.append(f"{MODEL_CONCURRENCY}: model names are 1..{MAX_MODEL_KEY} characters")
        elif type(cap) is not int or not 1 <= cap <= MAX_MODEL_CAP:
            problems.append(f"{MODEL_CONCURRENCY}.{model}: must be an integer 1..{MAX_MODEL_CAP}")
    return problems


def read_overrides(value: Any) -> RateLimitOverrides:
    """The overrides of a stored value, leniently (anything invalid is left out)."""
    if not isinstance(value, Mapping) or not value:
        return NO_OVERRIDES

    def number(key: str) -> int:
        item = value.get(key)
        return item if type(item) is int and 0 < item <= INT_BOUNDS[key] else 0

    models = value.get(MODEL_CONCURRENCY)
    caps = tuple(
        (str(m), c)
        for m, c in (models.items() if isinstance(models, Mapping) else ())
        if type(c) is int and 1 <= c <= MAX_MODEL_CAP
    )
    return RateLimitOverrides(
        rpm=number("rpm"),
        min_time_ms=number("minTime"),
        max_concurrent=number("maxConcurrent"),
        max_wait_ms=number("maxWaitMs"),
        model_concurrency=caps,
    )
