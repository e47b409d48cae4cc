"""Removals a prune asks for, through the services; users go before what they use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from resilience.services.rules import error_rule_delete, restatement_rule_delete
from routing.config_document import schema as s
from routing.config_document.errors import ConfigError
from routing.config_document.paths import Lines, Path
from routing.models import (
    ClientApiKey,
    Combo,
    FeatureFlag,
    ModelCatalogEntry,
    Provider,
    ProviderConnection,
)
from routing.services import (
    api_key_delete,
    catalog_entry_delete,
    combo_delete,
    combo_save,
    connection_delete,
    feature_flag_delete,
    provider_delete,
)

Identity = tuple[Any, ...]
Remover = Callable[[Identity, Path, Lines], None]


def _gone(path: Path, lines: Lines) -> ConfigError:
    return ConfigError([lines.problem(path, "was removed meanwhile")])


def _client_key(identity: Identity, path: Path, lines: Lines) -> None:
    key = ClientApiKey.objects.filter(key_hash=identity[0]).first()
    if key is None:
        raise _gone(path, lines)
    api_key_delete(key=key)


def _combo(identity: Identity, path: Path, lines: Lines) -> None:
    """A combo's own targets go first, so two combos removed together that name each other
    can both go; a combo that stays and names this one keeps it (the removal is refused)."""
    combo = Combo.objects.filter(name=identity[0]).first()
    if combo is None:
        raise _gone(path, lines)
    combo_save(combo=combo, targets=[])
    combo_delete(combo=combo)


def _catalog_entry(identity: Identity, path: Path, lines: Lines) -> None:
    entry = ModelCatalogEntry.objects.filter(provider_id=identity[0], model=identity[1]).first()
    if entry is None:
        raise _gone(path, lines)
    catalog_entry_delete(entry=entry)


def _error_rule(identity: Identity, path: Path, lines: Lines) -> None:
    rule = ProviderErrorRule.objects.filter(
        provider=identity[0], rule_id=identity[1], is_builtin=False
    ).first()
    if rule is None:
        raise _gone(path, lines)
    error_rule_delete(rule=rule)


def _restatement_rule(identity: Identity, path: Path, lines: Lines) -> None:
    rule = StatusRestatementRule.objects.filter(
        provider=identity[0], rule_id=identity[1], is_builtin=False
    ).first()
    if rule is None:
        raise _gone(path, lines)
    restatement_rule_delete(rule=rule)


def _flag(identity: Identity, path: Path, lines: Lines) -> None:
    flag = FeatureFlag.objects.filter(name=identity[0]).first()
    if flag is None:
        raise _gone(path, lines)
    feature_flag_delete(flag=flag)


def _connection(identity: Identity, path: Path, lines: Lines) -> None:
    connection = ProviderConnection.objects.filter(provider_id=identity[0], name=identity[1])
    found = connection.first()
    if found is None:
        raise _gone(path, lines)
    connection_delete(connection=found)


def _provider(identity: Identity, path: Path, lines: Lines) -> None:
    provider = Provider.objects.filter(pk=identity[0]).first()
    if provider is None:
        raise _gone(path, lines)
    provider_delete(provider=provider)


# Removal order: what uses an object goes before it (a combo's targets pin connections and
# providers; a key's allow-list names connections; a provider goes last).
REMOVERS: tuple[tuple[s.Section, Remover], ...] = (
    (s.CLIENT_KEYS, _client_key),
    (s.COMBOS, _combo),
    (s.MODEL_CATALOG, _catalog_entry),
    (s.ERROR_RULES, _error_rule),
    (s.RESTATEMENT_RULES, _restatement_rule),
    (s.FEATURE_FLAGS, _flag),
    (s.CONNECTIONS, _connection),
    (s.PROVIDERS, _provider),
)
