"""The settings-document framework: sections declared by the apps, one document (pure).

Each app declares the sections it reads (``Section``: fields, rules, typed object, words) and
registers them with ``SETTINGS``; the registry resolves a stored document into typed sections,
checks and applies patches, and describes the schema for the API and the admin page. See
``omniroute.core.settings.registry`` and docs/configuration.md.
"""

from __future__ import annotations

from omniroute.core.settings.fields import (
    MS_PER_DAY,
    MS_PER_HOUR,
    AtMostRule,
    BelowRule,
    Default,
    FieldSpec,
    Kind,
    Rule,
    Value,
    number_of,
    to_integer,
)
from omniroute.core.settings.patch import ROOT_FIELD, SettingsError, flatten, merge, unflatten
from omniroute.core.settings.registry import SETTINGS, ResolvedSettings, SettingsRegistry
from omniroute.core.settings.schema import Schema
from omniroute.core.settings.section import Section, Words, part_of

__all__ = [
    "MS_PER_DAY",
    "MS_PER_HOUR",
    "ROOT_FIELD",
    "SETTINGS",
    "AtMostRule",
    "BelowRule",
    "Default",
    "FieldSpec",
    "Kind",
    "ResolvedSettings",
    "Rule",
    "Schema",
    "Section",
    "SettingsError",
    "SettingsRegistry",
    "Value",
    "Words",
    "flatten",
    "merge",
    "number_of",
    "part_of",
    "to_integer",
    "unflatten",
]
