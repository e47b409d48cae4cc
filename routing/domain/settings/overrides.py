"""Per-combo overrides of the ``attempts`` settings (pure).

A combo may set any key of the ``attempts`` section for itself (``{"retriesPerTarget": 0}``);
the keys it leaves out follow the global settings. The keys and their bounds are the settings
schema's own rows (``ATTEMPT_FIELDS``), so a key added to the section can be overridden at once.
As with the settings document, overrides are written strictly and read leniently:

- ``attempt_overrides_validate`` (admin and API): unknown keys, wrong types and out-of-range
  values are errors naming the key, checked by the settings' own ``validate_patch``;
- ``attempt_overrides_read`` (building the routing snapshot): a stored value that is no longer
  valid (say, a key later removed) is clamped or dropped, so it never breaks routing;
- ``with_overrides`` applies them to a policy.

Hedging is the one exception to "the combo's value replaces the global one": it is off when
``hedgeEnabled`` is false or ``hedgeAfterMs`` is 0 at any level, so a combo can turn it off
for itself but never back on against the global setting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from omniroute.core.settings import ROOT_FIELD, Kind, Schema, SettingsError, to_integer
from omniroute.core.settings.patch import validate_patch
from resilience.domain.attempts.policy import AttemptPolicy
from routing.domain.settings.fields import ATTEMPT_FIELDS
from routing.domain.settings.sections import ATTEMPTS

SECTION = ATTEMPTS.name
_SCHEMA = Schema.of((ATTEMPTS,))  # the overrides are checked as a patch of this section alone
_PREFIX = f"{SECTION}."
_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")


def attempt_override_keys() -> tuple[str, ...]:
    """The keys a combo may override, camelCase as in the settings document."""
    return tuple(path.removeprefix(_PREFIX) for path in ATTEMPT_FIELDS)


def attempt_override_bounds() -> dict[str, tuple[int, int]]:
    """Each overridable integer key's (minimum, maximum), for help texts."""
    return {
        path.removeprefix(_PREFIX): (spec.minimum, spec.maximum)
        for path, spec in ATTEMPT_FIELDS.items()
        if spec.kind is Kind.INT
    }


Override = int | bool


def attempt_overrides_validate(raw: Any) -> dict[str, Override]:
    """``raw`` checked strictly; ``SettingsError`` keyed by the bad override keys (or
    ``ROOT_FIELD`` when ``raw`` is not an object), e.g. ``{"retriesPerTarget": "must be
    between 0 and 5"}``."""
    if not isinstance(raw, Mapping):
        raise SettingsError({ROOT_FIELD: "must be a JSON object"})
    try:
        checked = validate_patch(_SCHEMA, {SECTION: raw})
    except SettingsError as exc:
        raise SettingsError({_key(path): _say(msg) for path, msg in exc.errors.items()}) from None
    overrides: dict[str, Override] = checked.get(SECTION, {})
    return overrides


def _key(path: str) -> str:
    return path.removeprefix(_PREFIX)


def _say(message: str) -> str:
    if message != "unknown key":
        return message
    return f"unknown key (the keys are {', '.join(attempt_override_keys())})"


def attempt_overrides_read(raw: Any) -> dict[str, Override]:
    """The usable overrides of a stored value: known integer keys, clamped to their bounds,
    and known boolean keys holding a boolean; anything else is left out (the global setting
    applies)."""
    if not isinstance(raw, Mapping):
        return {}
    read: dict[str, Override] = {}
    for key, value in raw.items():
        spec = ATTEMPT_FIELDS.get(f"{_PREFIX}{key}")
        if spec is not None and spec.kind is Kind.BOOL and isinstance(value, bool):
            read[str(key)] = value
            continue
        number = to_integer(value) if spec is not None and spec.kind is Kind.INT else None
        if spec is not None and number is not None:
            read[str(key)] = spec.clamp(number)
    return read


def snake_case(key: str) -> str:
    """``retriesPerTarget`` → ``retries_per_target``."""
    return _WORD_START.sub("_", key).lower()


def with_overrides(policy: AttemptPolicy, overrides: Mapping[str, Override]) -> AttemptPolicy:
    """``policy`` with each camelCase key of ``overrides`` replacing its snake_case field;
    ``ValueError`` for a key that names no field of the policy. Hedging stays off when the
    global policy has it off (see the module docstring)."""
    changes: dict[str, Any] = {snake_case(key): value for key, value in overrides.items()}
    unknown = sorted(set(changes) - {f.name for f in fields(policy)})
    if unknown:
        raise ValueError(f"not attempt policy fields: {', '.join(unknown)}")
    if not policy.hedge_enabled:
        changes.pop("hedge_enabled", None)
    if policy.hedge_after_ms == 0:
        changes.pop("hedge_after_ms", None)
    return replace(policy, **changes) if changes else policy
