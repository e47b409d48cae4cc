"""The document of the database as it stands (sync ORM reads; nothing here writes).

``document_current`` holds the connections' plaintext secrets, for comparing with a document
being imported; ``document_export`` is what leaves the process: each secret replaced by its
reference, sections sorted by natural key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from resilience.selectors.settings import resilience_settings_stored
from routing.config_document import schema as s
from routing.config_document import values
from routing.config_document.references import references_write, variables_assign
from routing.crypto import decrypt_secret
from routing.models import (
    ClientApiKey,
    Combo,
    ComboTarget,
    FeatureFlag,
    ModelCatalogEntry,
    Provider,
    ProviderConnection,
)


def _columns(row: Any, section: s.Section) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in section.fields if hasattr(row, f.name)}


def _providers() -> Iterable[dict[str, Any]]:
    return (_columns(row, s.PROVIDERS) for row in Provider.objects.all())


def _connections() -> Iterable[dict[str, Any]]:
    for row in ProviderConnection.objects.all():
        item = {**_columns(row, s.CONNECTIONS), "provider": row.provider_id}
        for field, encrypted in (
            ("secret", row.secret_encrypted),
            ("refresh_secret", row.refresh_secret_encrypted),
        ):
            if encrypted:  # a connection without one leaves the field out
                item[field] = decrypt_secret(encrypted)
        yield item


def _catalog() -> Iterable[dict[str, Any]]:
    for row in ModelCatalogEntry.objects.all():
        yield {**_columns(row, s.MODEL_CATALOG), "provider": row.provider_id}


def _target(row: ComboTarget) -> dict[str, Any]:
    return {
        "provider": row.provider_id,
        "model": row.model,
        "connection": row.connection.name if row.connection is not None else None,
        "combo": row.combo_ref.name if row.combo_ref is not None else None,
        "weight": row.weight,
        "fallback_only_on_quota_exhaustion": row.fallback_only_on_quota_exhaustion,
    }


def _combos() -> Iterable[dict[str, Any]]:
    rows = Combo.objects.prefetch_related("targets__connection", "targets__combo_ref")
    for row in rows:
        targets = sorted(row.targets.all(), key=lambda t: (t.position, t.pk))
        yield {**_columns(row, s.COMBOS), "targets": [_target(t) for t in targets]}


def _client_keys() -> Iterable[dict[str, Any]]:
    for row in ClientApiKey.objects.prefetch_related("allowed_connections"):
        allowed = sorted(f"{c.provider_id}/{c.name}" for c in row.allowed_connections.all())
        yield {
            **_columns(row, s.CLIENT_KEYS),
            "allowed_connections": allowed,
            "revoked": row.revoked_at is not None,
        }


def _error_rules() -> Iterable[dict[str, Any]]:
    rows = ProviderErrorRule.objects.filter(is_builtin=False)
    return (_columns(row, s.ERROR_RULES) for row in rows)


def _restatement_rules() -> Iterable[dict[str, Any]]:
    rows = StatusRestatementRule.objects.filter(is_builtin=False)
    return (_columns(row, s.RESTATEMENT_RULES) for row in rows)


def _builtin_rules() -> Iterable[dict[str, Any]]:
    """Only the built-in rules switched off: the others are as the gateway ships them."""
    kinds = (("error", ProviderErrorRule), ("restatement", StatusRestatementRule))
    for kind, model in kinds:
        for provider, rule_id in model.objects.filter(
            is_builtin=True, is_enabled=False
        ).values_list("provider", "rule_id"):
            yield {"kind": kind, "provider": provider, "rule_id": rule_id, "is_enabled": False}


def _flags() -> Iterable[dict[str, Any]]:
    return (_columns(row, s.FEATURE_FLAGS) for row in FeatureFlag.objects.all())


READERS: dict[str, Callable[[], Iterable[dict[str, Any]]]] = {
    s.PROVIDERS.name: _providers,
    s.CONNECTIONS.name: _connections,
    s.MODEL_CATALOG.name: _catalog,
    s.COMBOS.name: _combos,
    s.CLIENT_KEYS.name: _client_keys,
    s.ERROR_RULES.name: _error_rules,
    s.RESTATEMENT_RULES.name: _restatement_rules,
    s.BUILTIN_RULES.name: _builtin_rules,
    s.FEATURE_FLAGS.name: _flags,
}


def _normalised(section: s.Section, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows in the document's canonical form (the same checks a file goes through)."""
    items = s.document_read({section.name: list(rows)}).items(section) or []
    return sorted(items, key=section.sort_key)


def document_current() -> s.Document:
    """The configuration in the database, connections with their plaintext secrets."""
    sections = {name: _normalised(_section(name), read()) for name, read in READERS.items()}
    return s.Document(sections, values.mapping(resilience_settings_stored()))


def _section(name: str) -> s.Section:
    return next(section for section in s.SECTIONS if section.name == name)


def document_export() -> dict[str, Any]:
    """The configuration as an export writes it: no ids, no timestamps, no secret."""
    current = document_current()
    connections = current.items(s.CONNECTIONS) or []
    stems = variables_assign((c["provider"], c["name"]) for c in connections)
    exported: dict[str, Any] = {"version": s.DOCUMENT_VERSION}
    for section in s.SECTIONS:
        exported[section.name] = current.items(section)
    exported[s.CONNECTIONS.name] = [
        references_write(c, stems[(c["provider"], c["name"])]) for c in connections
    ]
    exported[s.SETTINGS_SECTION] = current.settings
    return exported
