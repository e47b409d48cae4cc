"""What applying a document would change: created, updated and removed objects (pure).

Objects are matched by natural key. An object the document gives but the database lacks is
created; one whose fields differ is updated (the changed field names are listed, never a
secret's value); with ``prune``, one the database has in a section the document gives, but
the document lacks, is removed. A section the document leaves out is left alone. The settings
document is one object: when given, it replaces the stored one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from omniroute.core.settings import flatten, unflatten
from routing.config_document import schema as s


class Action(StrEnum):
    """What happens to one object."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


SIGNS = {Action.CREATE: "+", Action.UPDATE: "~", Action.DELETE: "-"}


@dataclass(frozen=True)
class Change:
    """One object to create, update or remove; ``index`` is its place in the document."""

    section: s.Section
    action: Action
    identity: tuple[Any, ...]
    fields: tuple[str, ...] = ()
    index: int | None = None
    desired: Mapping[str, Any] | None = None

    def describe(self) -> str:
        """``~ connections acme/primary: priority, secret``."""
        text = f"{SIGNS[self.action]} {self.section.name} {self.section.label(self.identity)}"
        return f"{text}: {', '.join(self.fields)}" if self.fields else text


@dataclass(frozen=True)
class SettingsChange:
    """The settings document's change: the patch that turns the stored one into the given one
    (``null`` removes a value) and the dotted paths it changes."""

    patch: dict[str, Any]
    paths: tuple[str, ...]

    def describe(self) -> str:
        return f"~ {s.SETTINGS_SECTION}: {', '.join(self.paths)}"


@dataclass(frozen=True)
class Plan:
    """Every change, sections in the document's order, each section by natural key."""

    changes: tuple[Change, ...]
    settings: SettingsChange | None = None

    def __bool__(self) -> bool:
        return bool(self.changes) or self.settings is not None

    def lines(self) -> list[str]:
        """One line per change."""
        described = [change.describe() for change in self.changes]
        return described + ([self.settings.describe()] if self.settings else [])

    def of(self, section: s.Section, action: Action) -> list[Change]:
        """The changes of ``section`` that are ``action``s."""
        return [c for c in self.changes if c.section is section and c.action is action]


def plan_build(current: s.Document, desired: s.Document, *, prune: bool) -> Plan:
    """The changes that turn ``current`` into ``desired``."""
    changes: list[Change] = []
    for section in s.SECTIONS:
        wanted = desired.items(section)
        if wanted is not None:
            changes += _section_changes(section, current.items(section) or [], wanted, prune)
    return Plan(tuple(changes), _settings_change(current.settings, desired.settings))


def _section_changes(
    section: s.Section,
    have: list[dict[str, Any]],
    wanted: list[dict[str, Any]],
    prune: bool,
) -> list[Change]:
    stored = {section.identity(item): item for item in have}
    changes: list[Change] = []
    for index, item in sorted(enumerate(wanted), key=lambda pair: section.sort_key(pair[1])):
        identity = section.identity(item)
        before = stored.get(identity, _builtin_default(section, item))
        if before is None:
            changes.append(Change(section, Action.CREATE, identity, (), index, item))
        elif fields := _changed(section, before, item):
            changes.append(Change(section, Action.UPDATE, identity, fields, index, item))
    if prune:
        given = {section.identity(item) for item in wanted}
        gone = sorted((i for i in stored if i not in given), key=lambda i: [str(p) for p in i])
        changes += [_removal(section, stored[identity]) for identity in gone]
    return changes


def _builtin_default(section: s.Section, item: Mapping[str, Any]) -> dict[str, Any] | None:
    """A built-in rule not listed as switched off is on: the baseline it is compared with."""
    return {**item, "is_enabled": True} if section is s.BUILTIN_RULES else None


def _removal(section: s.Section, item: dict[str, Any]) -> Change:
    identity = section.identity(item)
    if section is s.BUILTIN_RULES:  # left out of the document: back on, as shipped
        on = {**item, "is_enabled": True}
        return Change(section, Action.UPDATE, identity, ("is_enabled",), None, on)
    return Change(section, Action.DELETE, identity)


def _changed(
    section: s.Section, before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[str, ...]:
    return tuple(f.name for f in section.fields if _differs(f, before, after))


def _differs(spec: s.Field, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    if not spec.write_only:
        return bool(before.get(spec.name) != after.get(spec.name))
    # A secret left out keeps the stored one; "" and null both mean none.
    return spec.name in after and (before.get(spec.name) or None) != (after[spec.name] or None)


def _settings_change(
    stored: dict[str, Any] | None, desired: dict[str, Any] | None
) -> SettingsChange | None:
    if desired is None:
        return None
    before, after = flatten(stored or {}), flatten(desired)
    paths = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if not paths:
        return None
    return SettingsChange(unflatten({p: after.get(p) for p in paths}), tuple(paths))
