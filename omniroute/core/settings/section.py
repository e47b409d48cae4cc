"""A section of the settings document, declared by the app that reads it (pure).

A ``Section`` is a top-level key of the document (``"requestQueue"``) with everything the framework
needs to handle it: its fields (dotted path → ``FieldSpec``: kind, bounds, default, environment
variable, help), the cross-field rules among them, how the resolved values build the typed object
the app reads and how that object renders back to the document's camelCase shape, and the words of
the operator's page (a heading per group of fields, a label and a help text per field). A field the
section no longer has may be kept as *retired* for a release: a patch that sets it is accepted, the
value ignored, and the caller told why (``retired``). An app registers its sections with the
registry (``omniroute.core.settings.registry``); docs/configuration.md describes each one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from omniroute.core.settings.fields import FieldSpec, Rule, Value

T = TypeVar("T")

# A heading and its one-line description, or a label and its help text.
Words = tuple[str, str]


@dataclass(frozen=True, eq=False)
class Section(Generic[T]):
    """One top-level section: ``fields`` are keyed by full dotted path under ``name``;
    ``build`` turns the resolved values (every field of the document, by path, rules applied)
    into the section's typed object and ``render`` turns that object back into the section's
    part of the document. ``headings`` (group path → heading, description) and ``words``
    (field path → label, help) are the words of the operator's page. ``retired`` (field path →
    why it went): fields a patch may still set, ignored with a warning."""

    name: str
    fields: Mapping[str, FieldSpec]
    build: Callable[[Mapping[str, Value]], T]
    render: Callable[[T], dict[str, Any]]
    rules: tuple[Rule, ...] = ()
    headings: Mapping[str, Words] = field(default_factory=dict)
    words: Mapping[str, Words] = field(default_factory=dict)
    retired: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        paths = [*self.fields, *self.retired]
        stray = [path for path in paths if not path.startswith(f"{self.name}.")]
        if stray or "." in self.name or not self.fields:
            raise ValueError(f"settings section {self.name!r}: fields outside it: {stray}")


def part_of(table: Mapping[str, Words], name: str) -> dict[str, Words]:
    """The entries of an app's words table that belong to section ``name`` (the section itself
    and every path under it)."""
    return {key: words for key, words in table.items() if key.split(".", 1)[0] == name}
