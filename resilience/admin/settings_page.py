"""The settings page's layout: one collapsible part per section of the document, and which
values differ from their defaults.

A section holding a changed value (or a field with an error) starts open, the others closed, so
an operator sees at once what was changed on this gateway; each changed value is marked and its
default shown. The default is what the gateway would use with nothing stored: the field's
default with its environment override applied.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omniroute.core.settings import SETTINGS, flatten
from resilience.admin.settings_text import group_heading


def settings_defaults() -> dict[str, Any]:
    """Every field's default by dotted path, as the document shows it (no stored value)."""
    return flatten(SETTINGS.render(SETTINGS.resolve({}, os.environ)))


def changed_paths(current: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """The dotted paths of the document ``current`` whose value differs from the default."""
    return [path for path, value in flatten(current).items() if value != defaults.get(path)]


def shown(value: Any) -> str:
    """A value as the page writes it: Yes / No / Unset, 1,000, or "408, 429"."""
    if value is None:
        return "Unset"
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, list | tuple):
        return ", ".join(map(shown, value))
    return f"{value:,}" if isinstance(value, int) else str(value)


def section_of(group: str) -> str:
    """The section of a group or a field: ``providerBreaker`` for ``providerBreaker.oauth``."""
    return group.split(".", 1)[0]


def groups() -> dict[str, list[str]]:
    """The document's groups of fields (dotted paths), in the schema's order."""
    found: dict[str, list[str]] = {}
    for path in SETTINGS.schema.fields:
        found.setdefault(path.rsplit(".", 1)[0], []).append(path)
    return found


@dataclass(frozen=True)
class PageSection:
    """One section of the page: its words, its fieldsets (Django's), what in it changed."""

    name: str
    heading: str
    description: str
    fieldsets: Sequence[Any]  # django.contrib.admin.helpers.Fieldset
    changed: Sequence[str]
    has_errors: bool

    @property
    def open(self) -> bool:
        """Shown open: it holds a changed value or a field with an error."""
        return bool(self.changed) or self.has_errors


def page_sections(
    fieldsets: Iterable[Any], changed: Iterable[str], errors: Iterable[str]
) -> list[PageSection]:
    """The page's sections, with the fieldsets Django built (one per group, in ``groups()``'s
    order), the changed paths and the dotted paths of the fields with errors."""
    by_section: dict[str, list[Any]] = {}
    for group, fieldset in zip(groups(), fieldsets, strict=True):
        by_section.setdefault(section_of(group), []).append(fieldset)
    changed, errors = list(changed), set(errors)
    return [
        PageSection(
            name,
            *group_heading(name),
            fieldsets=members,
            changed=[path for path in changed if section_of(path) == name],
            has_errors=any(section_of(path) == name for path in errors),
        )
        for name, members in by_section.items()
    ]
