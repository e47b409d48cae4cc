"""One setting of the settings document, and constraints between settings (pure).

``FieldSpec`` is one row of a section's field table (``omniroute.core.settings.section``): its
``Kind`` (an integer with bounds, a boolean, an optional boolean that may be unset, or a list of
integers with bounds on each item and values it may not hold), its default and an optional
environment override; it reads a stored value leniently (``coerce``) and a patched one strictly
(``strict``). A ``Rule`` relates two integer fields: clamped on resolve, an error on a patch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

MS_PER_HOUR = 3_600_000
MS_PER_DAY = 86_400_000

# None: an OPTIONAL_BOOL left unset. An INT_LIST resolves to a tuple; a patch holds a list (JSON).
Value = int | bool | tuple[int, ...] | list[int] | None
Default = Value | Callable[[Mapping[str, str]], Value]

_ENV_ON = frozenset({"true", "1", "on"})
_ENV_OFF = frozenset({"false", "0", "off"})
# The reference reads its stream switches (STREAM_RECOVERY_*) with "yes" as well.
_ENV_YES_ON = _ENV_ON | {"yes"}
_ENV_YES_OFF = _ENV_OFF | {"no"}


class Kind(StrEnum):
    """What a setting holds."""

    INT = "int"
    BOOL = "bool"
    OPTIONAL_BOOL = "optional_bool"  # true, false or unset (null)
    INT_LIST = "int_list"  # a non-empty list of integers, each within the bounds


def to_integer(raw: Any) -> int | None:
    """The reference's "toInteger": a finite number or numeric string, truncated; else None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and "_" not in raw:  # float() takes "1_000"; JSON and JS do not
        try:
            raw = float(raw.strip())
        except ValueError:
            return None
    if isinstance(raw, float) and math.isfinite(raw):
        return math.trunc(raw)
    return None


def _int_items(
    raw: Any, minimum: int, maximum: int, excluded: frozenset[int] = frozenset()
) -> tuple[int, ...]:
    """The distinct in-range, allowed integers of a stored list, in order; () for anything
    else."""
    if not isinstance(raw, list | tuple):
        return ()
    numbers = (to_integer(item) for item in raw)
    return tuple(
        dict.fromkeys(
            n for n in numbers if n is not None and minimum <= n <= maximum and n not in excluded
        )
    )


def _env_flag(raw: str | None, *, yes: bool) -> bool | None:
    text = (raw or "").strip().lower()
    on, off = (_ENV_YES_ON, _ENV_YES_OFF) if yes else (_ENV_ON, _ENV_OFF)
    return True if text in on else False if text in off else None


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One setting: its kind, bounds (integers, list items), default and optional environment
    override. ``env_yes`` (booleans): the environment variable also takes "yes" and "no".
    ``help``: what the setting does, in words, for the operator's form. ``excluded`` (integer
    lists): values the list may not hold; a stored list loses them, a patch holding one is
    refused."""

    kind: Kind
    default: Default
    minimum: int = 0
    maximum: int = 0
    env: str | None = None
    env_yes: bool = False
    help: str = ""
    excluded: frozenset[int] = frozenset()

    def default_value(self, env: Mapping[str, str]) -> Value:
        """The default with the environment override applied (invalid overrides are ignored)."""
        base = self.default(env) if callable(self.default) else self.default
        raw = env.get(self.env) if self.env else None
        if self.kind in (Kind.INT, Kind.INT_LIST):
            return self.coerce(raw, base)
        flag = _env_flag(raw, yes=self.env_yes)
        return self.coerce(base, base) if flag is None else flag

    def coerce(self, raw: Any, fallback: Value) -> Value:
        """The lenient reading of ``raw``; ``fallback`` (clamped) when it is unusable."""
        if self.kind is Kind.INT:
            number = to_integer(raw)
            return self.clamp(number_or_zero(fallback) if number is None else number)
        if self.kind is Kind.INT_LIST:  # an empty or unusable list keeps the fallback
            return _int_items(raw, self.minimum, self.maximum, self.excluded) or _int_items(
                fallback, self.minimum, self.maximum, self.excluded
            )
        flag = raw if isinstance(raw, bool) else None
        if flag is not None:
            return flag
        return bool(fallback) if self.kind is Kind.BOOL else fallback

    def clamp(self, value: int) -> int:
        """``value`` within the bounds."""
        return min(self.maximum, max(self.minimum, value))

    def strict(self, raw: Any) -> Value:
        """``raw`` if it is valid as it stands; ``ValueError`` with the message otherwise."""
        if self.kind is Kind.OPTIONAL_BOOL:
            if raw is not None and not isinstance(raw, bool):
                raise ValueError("must be a boolean or null")
            return raw
        if self.kind is Kind.BOOL:
            if not isinstance(raw, bool):
                raise ValueError("must be a boolean")
            return raw
        if self.kind is Kind.INT_LIST:
            return self._strict_list(raw)
        return self._strict_int(raw)

    def _strict_int(self, raw: Any) -> int:
        # JSON has one number type: 5.0 is the integer 5 (as in the reference's zod .int()).
        integral = isinstance(raw, int) or (isinstance(raw, float) and raw.is_integer())
        if isinstance(raw, bool) or not integral:
            raise ValueError("must be an integer")
        value = int(raw)
        if not self.minimum <= value <= self.maximum:
            raise ValueError(f"must be between {self.minimum} and {self.maximum}")
        return value

    def _strict_list(self, raw: Any) -> list[int]:
        message = f"must be a non-empty list of integers between {self.minimum} and {self.maximum}"
        if self.excluded:
            message += ", without " + ", ".join(map(str, sorted(self.excluded)))
        if not isinstance(raw, list) or not raw:
            raise ValueError(message)
        try:
            items = [self._strict_int(item) for item in raw]
        except ValueError:
            raise ValueError(message) from None
        if self.excluded.intersection(items):
            raise ValueError(message)
        return items


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def number_or_zero(value: Value) -> int:
    """``value`` if it is an integer, else 0."""
    return value if isinstance(value, int) else 0


def number_of(values: Mapping[str, Value], path: str) -> int:
    """An integer field's value (the rules relate integer fields only)."""
    return number_or_zero(values[path])


class Rule(Protocol):
    """A constraint between fields: clamped on resolve, an error on a patch."""

    def fix(self, values: dict[str, Value]) -> None: ...

    def check(self, values: Mapping[str, Value], touched: frozenset[str]) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True)
class BelowRule:
    """``lower`` < ``upper`` (forced to ``upper`` − 1, at least 1); moot when ``upper`` ≤ 1."""

    lower: str
    upper: str

    def fix(self, values: dict[str, Value]) -> None:
        high = number_of(values, self.upper)
        values[self.lower] = min(number_of(values, self.lower), max(1, high - 1))

    def check(self, values: Mapping[str, Value], touched: frozenset[str]) -> dict[str, str]:
        if not touched & {self.lower, self.upper} or not {self.lower, self.upper} <= set(values):
            return {}
        low, high = number_of(values, self.lower), number_of(values, self.upper)
        if high <= 1 or low < high:
            return {}
        if self.lower in touched:  # name the field the caller changed
            return {self.lower: f"must be less than {_leaf(self.upper)} ({high})"}
        return {self.upper: f"must be greater than {_leaf(self.lower)} ({low})"}


@dataclass(frozen=True, slots=True)
class AtMostRule:
    """``lower`` ≤ ``upper`` (on resolve ``upper`` is raised to ``lower``, or with
    ``lower_yields`` ``lower`` is cut to ``upper``)."""

    lower: str
    upper: str
    lower_yields: bool = False

    def fix(self, values: dict[str, Value]) -> None:
        low, high = number_of(values, self.lower), number_of(values, self.upper)
        if self.lower_yields:
            values[self.lower] = min(low, high)
        else:
            values[self.upper] = max(high, low)

    def check(self, values: Mapping[str, Value], touched: frozenset[str]) -> dict[str, str]:
        if not touched & {self.lower, self.upper} or not {self.lower, self.upper} <= set(values):
            return {}
        low, high = number_of(values, self.lower), number_of(values, self.upper)
        if low <= high:
            return {}
        if self.lower in touched:
            return {self.lower: f"must not exceed {_leaf(self.upper)} ({high})"}
        return {self.upper: f"must be at least {_leaf(self.lower)} ({low})"}
