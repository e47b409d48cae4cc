"""The settings-document framework on its own (``omniroute.core.settings``): sections declared
and registered, resolved leniently, patched strictly, rendered back (pure; a private registry,
not the operator's document)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from omniroute.core.settings import (
    SETTINGS,
    AtMostRule,
    FieldSpec,
    Kind,
    Section,
    SettingsError,
    SettingsRegistry,
    Value,
    number_of,
)


def _limits(values: Mapping[str, Value]) -> tuple[int, int]:
    return number_of(values, "limits.lowMs"), number_of(values, "limits.highMs")


def _limits_document(limits: tuple[int, int]) -> dict[str, Any]:
    return {"lowMs": limits[0], "highMs": limits[1]}


LIMITS: Section[tuple[int, int]] = Section(
    "limits",
    {
        "limits.lowMs": FieldSpec(Kind.INT, 10, 0, 100),
        "limits.highMs": FieldSpec(Kind.INT, 50, 0, 100, env="LIMITS_HIGH_MS"),
    },
    _limits,
    _limits_document,
    (AtMostRule("limits.lowMs", "limits.highMs"),),
    headings={"limits": ("Limits", "Two numbers.")},
    words={"limits.lowMs": ("Low (ms)", "The lower one.")},
)
SWITCH: Section[bool] = Section(
    "switch",
    {"switch.on": FieldSpec(Kind.BOOL, False)},
    lambda values: bool(values["switch.on"]),
    lambda on: {"on": on},
)


def _registry() -> SettingsRegistry:
    registry = SettingsRegistry()
    registry.register(LIMITS, SWITCH)
    return registry


def test_each_section_resolves_to_its_typed_object() -> None:
    resolved = _registry().resolve({"limits": {"lowMs": "70.9"}}, {"LIMITS_HIGH_MS": "60"})

    assert resolved[LIMITS] == (70, 70)  # truncated, then the rule raises the high mark
    assert resolved[SWITCH] is False


def test_the_document_renders_section_by_section_in_registration_order() -> None:
    registry = _registry()

    document = registry.render(registry.resolve({}, {}))

    assert list(document) == ["limits", "switch"]
    assert document == {"limits": {"lowMs": 10, "highMs": 50}, "switch": {"on": False}}


def test_a_patch_is_checked_strictly_against_every_section() -> None:
    registry = _registry()
    current = registry.render(registry.resolve({}, {}))

    assert registry.validate_patch({"switch": {"on": True}}, current) == {"switch": {"on": True}}
    with pytest.raises(SettingsError) as error:
        registry.validate_patch({"limits": {"lowMs": 60}, "other": {}}, current)
    assert error.value.errors == {"other": "unknown section"}
    with pytest.raises(SettingsError) as error:
        registry.validate_patch({"limits": {"lowMs": 60}}, current)
    assert error.value.errors == {"limits.lowMs": "must not exceed highMs (50)"}


def test_the_schema_combines_the_sections() -> None:
    schema = _registry().schema

    assert schema.names == ("limits", "switch")
    assert list(schema.fields) == ["limits.lowMs", "limits.highMs", "switch.on"]
    assert schema.branches == frozenset({"limits", "switch"})


def test_the_words_come_from_the_owning_section() -> None:
    registry = _registry()

    assert registry.words("limits.lowMs") == ("Low (ms)", "The lower one.")
    assert registry.words("limits.highMs") is None
    assert registry.heading("limits") == ("Limits", "Two numbers.")
    assert registry.heading("nowhere") is None


def test_a_name_is_registered_once() -> None:
    registry = _registry()
    registry.register(LIMITS)  # the same section again: nothing changes
    other = Section("limits", {"limits.x": FieldSpec(Kind.BOOL, True)}, bool, lambda v: {})

    with pytest.raises(ValueError, match="already registered"):
        registry.register(other)
    assert registry.schema.names == ("limits", "switch")


def test_a_section_holds_only_its_own_fields() -> None:
    with pytest.raises(ValueError, match="fields outside it"):
        Section("limits", {"other.x": FieldSpec(Kind.BOOL, True)}, bool, lambda v: {})


def test_the_operator_document_has_every_app_s_sections_in_app_order() -> None:
    # Resilience's sections, then routing's: INSTALLED_APPS order.
    assert SETTINGS.schema.names == (
        "providerBreaker",
        "providerCooldown",
        "connectionCooldown",
        "modelLockout",
        "availability",
        "attempts",
        "streamRecovery",
        "requestQueue",
        "quotaShareConcurrencyLimit",
        "comboCooldownWait",
        "sessionAffinity",
    )
