"""Checking and applying a patch to the settings document (pure).

``validate_patch`` checks a PATCH strictly against a ``Schema``: an unknown section or key, a value
of the wrong kind or out of range, or a broken cross-field rule is a ``SettingsError`` naming every
bad field. A retired field is accepted whatever its value and left out of the result; ``retired_in``
says which ones a patch set, and why they went. ``merge`` deep-merges a valid patch into the stored
document; ``flatten`` / ``unflatten`` convert between nested and dotted forms.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from omniroute.core.settings.fields import Value
from omniroute.core.settings.schema import Schema

ROOT_FIELD = "non_field_errors"  # the error key of problems with the document as a whole


class SettingsError(ValueError):
    """A rejected patch; ``errors`` maps each dotted field path to its message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{path}: {message}" for path, message in self.errors.items()))


def flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (leaves are anything but mappings)."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, path) if isinstance(value, Mapping) else {path: value})
    return flat


def unflatten(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` → ``{"a": {"b": 1}}``."""
    document: dict[str, Any] = {}
    for path, value in values.items():
        *parents, leaf = path.split(".")
        node = document
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return document


def _walk(schema: Schema, node: Mapping[Any, Any], prefix: str) -> Iterator[tuple[str, Value, str]]:
    """``(path, value, "")`` per valid leaf of a patch, ``(path, None, message)`` per error."""
    for key, raw in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        spec = schema.fields.get(path) if isinstance(key, str) and "." not in key else None
        if path in schema.retired:
            continue  # accepted and ignored; the caller warns (``retired_in``)
        if spec is not None:
            try:
                yield path, spec.strict(raw), ""
            except ValueError as exc:
                yield path, None, str(exc)
        elif not isinstance(key, str) or "." in key or path not in schema.branches:
            yield path, None, "unknown key" if prefix else "unknown section"
        elif not isinstance(raw, Mapping):
            yield path, None, "must be an object"
        else:
            yield from _walk(schema, raw, path)


def _check_rules(
    schema: Schema, values: Mapping[str, Value], current: Mapping[str, Any] | None
) -> dict[str, str]:
    base = {p: v for p, v in flatten(current or {}).items() if p in schema.fields}
    merged, touched = {**base, **values}, frozenset(values)
    errors: dict[str, str] = {}
    for rule in schema.rules:
        errors.update(rule.check(merged, touched))
    return errors


def validate_patch(
    schema: Schema, patch: Any, current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The patch, checked strictly against ``schema``; raises ``SettingsError`` naming every
    bad field.

    ``current`` is the full resolved document (the registry's ``render``) the patch will be
    merged over: the cross-field rules are checked on the merged values. Without it, only
    fields present in the patch are compared with each other.
    """
    if not isinstance(patch, Mapping):
        raise SettingsError({ROOT_FIELD: "must be a JSON object"})
    errors: dict[str, str] = {}
    values: dict[str, Value] = {}
    for path, value, message in _walk(schema, patch, ""):
        if message:
            errors[path] = message
        else:
            values[path] = value  # None: an OPTIONAL_BOOL cleared back to unset
    if not any(key in schema.names for key in patch):
        errors[ROOT_FIELD] = "must contain at least one of: " + ", ".join(schema.names)
    errors = errors or _check_rules(schema, values, current)
    if errors:
        raise SettingsError(errors)
    return unflatten(values)


def retired_in(schema: Schema, patch: Any) -> dict[str, str]:
    """The retired fields ``patch`` sets, each with why it went (empty for anything else)."""
    if not isinstance(patch, Mapping):
        return {}
    return {path: why for path, why in schema.retired.items() if _sets(patch, path.split("."))}


def _sets(node: Mapping[Any, Any], parts: list[str]) -> bool:
    head, *rest = parts
    if head not in node:
        return False
    child = node[head]
    return not rest or (isinstance(child, Mapping) and _sets(child, rest))


def merge(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` with ``patch`` deep-merged in; no mutation.

    Omitted fields keep their values; a ``null`` removes the stored value (back to the default).
    Empty objects are not kept: they mean the same as absent ones.
    """
    merged = copy.deepcopy(dict(stored))
    for key, value in patch.items():
        current = merged.get(key)
        if isinstance(value, Mapping):
            child = merge(current if isinstance(current, Mapping) else {}, value)
            if child:
                merged[key] = child
            else:
                merged.pop(key, None)
        elif value is None:
            merged.pop(key, None)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
