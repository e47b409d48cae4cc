"""The registry of settings sections and the operations on the whole document (pure).

The operator's settings are one JSON document (one row, ``GET``/``PATCH /api/resilience``)
whose top-level sections belong to different apps: each app declares its own ``Section`` and
registers it here when its app module is imported (``<app>/apps.py``), so the document lists
the sections in the order of ``INSTALLED_APPS`` and then of registration. Everything that reads
the whole document (the API, the admin page, the services) goes through ``SETTINGS``:

- ``resolve`` reads a stored document leniently and never fails: each field is read by its
  ``FieldSpec`` over its default (and environment override), the rules are enforced by
  clamping, and each section builds its typed object; the result, ``ResolvedSettings``, hands
  each app its sections typed (``resolved[REQUEST_QUEUE]``).
- ``validate_patch`` checks a partial document strictly (unknown keys, wrong types,
  out-of-range values and broken rules are errors, never clamped); a retired field is
  ignored, and ``retired_in`` names the ones a patch set, for the caller's warning.
- ``render`` turns resolved settings back into the full camelCase document.

Adding a section touches only the app that owns it: its ``Section`` (fields, rules, build,
render, words) and its registration. docs/configuration.md describes the sections.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from omniroute.core.settings.fields import Value
from omniroute.core.settings.patch import retired_in, validate_patch
from omniroute.core.settings.schema import Schema
from omniroute.core.settings.section import Section, Words

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ResolvedSettings:
    """Every registered section's typed object, by section name; read one with
    ``resolved[SECTION]``."""

    sections: Mapping[str, object]

    def __getitem__(self, section: Section[T]) -> T:
        return cast(T, self.sections[section.name])


def lookup(document: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a nested document, or None."""
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def resolve(schema: Schema, stored: Mapping[str, Any], env: Mapping[str, str]) -> ResolvedSettings:
    """The sections of ``schema`` resolved from a stored document over their defaults."""
    values: dict[str, Value] = {
        path: spec.coerce(lookup(stored, path), spec.default_value(env))
        for path, spec in schema.fields.items()
    }
    for rule in schema.rules:
        rule.fix(values)
    return ResolvedSettings({section.name: section.build(values) for section in schema.sections})


def render(schema: Schema, resolved: ResolvedSettings) -> dict[str, Any]:
    """The full document of ``resolved``, section by section in the schema's order."""
    return {
        section.name: section.render(resolved.sections[section.name]) for section in schema.sections
    }


class SettingsRegistry:
    """The sections of one settings document, in registration order."""

    def __init__(self) -> None:
        self._sections: dict[str, Section[Any]] = {}
        self._schema: Schema | None = None

    def register(self, *sections: Section[Any]) -> None:
        """Add ``sections``; registering the same section again does nothing, another section
        under a taken name is a ``ValueError``."""
        for section in sections:
            known = self._sections.get(section.name)
            if known is not None and known is not section:
                raise ValueError(f"settings section {section.name!r} is already registered")
            self._sections[section.name] = section
        self._schema = None

    @property
    def schema(self) -> Schema:
        """The combined schema of every registered section (built once per registration)."""
        if self._schema is None:
            self._schema = Schema.of(self._sections.values())
        return self._schema

    def __iter__(self) -> Iterator[Section[Any]]:
        return iter(self.schema.sections)

    def resolve(self, stored: Mapping[str, Any], env: Mapping[str, str]) -> ResolvedSettings:
        """The resolved settings of a stored document (never fails; see the module doc)."""
        return resolve(self.schema, stored, env)

    def render(self, resolved: ResolvedSettings) -> dict[str, Any]:
        """The full resolved document, camelCase."""
        return render(self.schema, resolved)

    def validate_patch(
        self, patch: Any, current: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``patch`` checked strictly against every registered section (``SettingsError``)."""
        return validate_patch(self.schema, patch, current)

    def retired_in(self, patch: Any) -> dict[str, str]:
        """The retired fields ``patch`` sets (accepted and ignored), each with why it went."""
        return retired_in(self.schema, patch)

    def words(self, path: str) -> Words | None:
        """The label and help text of a field, when its section gives them."""
        section = self._sections.get(path.split(".", 1)[0])
        return None if section is None else section.words.get(path)

    def heading(self, group: str) -> Words | None:
        """The heading and description of a group of fields, when its section gives them."""
        section = self._sections.get(group.split(".", 1)[0])
        return None if section is None else section.headings.get(group)


SETTINGS = SettingsRegistry()
"""The operator's settings document: every app registers its sections here."""
