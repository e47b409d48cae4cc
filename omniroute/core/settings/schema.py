"""The schema of a set of sections: every field of the document as a row (pure).

``Schema.of`` combines sections in their order: ``fields`` maps each dotted path to its
``FieldSpec``, ``rules`` are the sections' cross-field constraints, ``names`` the top-level keys,
``branches`` every object a document may contain and ``retired`` the fields a patch may still
set (ignored, with the reason they went). The registry keeps the schema of every
registered section; a single section's schema checks a part of the document on its own (a
combo's overrides of the ``attempts`` section, for example).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from omniroute.core.settings.fields import FieldSpec, Rule
from omniroute.core.settings.section import Section


@dataclass(frozen=True, slots=True)
class Schema:
    """The combined rows, rules and shape of some sections."""

    sections: tuple[Section[Any], ...]
    fields: dict[str, FieldSpec]
    rules: tuple[Rule, ...]
    names: tuple[str, ...]
    branches: frozenset[str]  # every proper prefix of a path
    retired: dict[str, str]  # path → why it went

    @classmethod
    def of(cls, sections: Iterable[Section[Any]]) -> Schema:
        """The schema of ``sections``, in their order."""
        ordered = tuple(sections)
        fields = {path: spec for section in ordered for path, spec in section.fields.items()}
        return cls(
            sections=ordered,
            fields=fields,
            rules=tuple(rule for section in ordered for rule in section.rules),
            names=tuple(section.name for section in ordered),
            branches=frozenset(
                ".".join(parts[:end])
                for parts in (path.split(".") for path in fields)
                for end in range(1, len(parts))
            ),
            retired={path: why for section in ordered for path, why in section.retired.items()},
        )
