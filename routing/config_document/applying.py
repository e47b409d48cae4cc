"""A document applied through the services (the one write path), in one transaction.

``config_import`` reads the document's secrets (references from the environment, when the
caller allows them), compares it with the database, and carries out the plan: creations and
updates section by section (providers before the connections that name them, every combo
before any combo's targets), then the removals a prune asks for, users before what they use.
A dry run does the same inside the transaction and rolls it back, so it checks everything a
real run would. The first object the services refuse stops the import with nothing changed;
its error names the object's line and field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.db.models import ProtectedError

from omniroute.core.settings import SettingsError
from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from resilience.services.rules import error_rule_save, restatement_rule_save, rule_set_enabled
from resilience.services.settings import resilience_settings_update
from routing.config_document import schema as s
from routing.config_document.errors import ConfigError
from routing.config_document.paths import NO_LINES, Lines, Path
from routing.config_document.plan import Action, Change, Plan, plan_build
from routing.config_document.reading import document_current
from routing.config_document.references import Resolver
from routing.config_document.removing import REMOVERS, Remover
from routing.config_document.values import moment_value
from routing.models import (
    ClientApiKey,
    Combo,
    ComboTarget,
    FeatureFlag,
    ModelCatalogEntry,
    Provider,
    ProviderConnection,
)
from routing.services import (
    api_key_restore,
    api_key_revoke,
    api_key_update,
    catalog_entry_save,
    combo_save,
    connection_save,
    feature_flag_save,
    provider_save,
)

RENAMED = {"combo_ref": "combo"}  # model field → document field, where they differ


def config_import(
    document: s.Document,
    *,
    lines: Lines = NO_LINES,
    environment: Mapping[str, str] | None,
    prune: bool = False,
    dry_run: bool = False,
    now: datetime,
) -> Plan:
    """Apply ``document`` and return what changed (or, on a dry run, would change).

    ``environment``: where secret references resolve from (``importconfig``); ``None``
    refuses every reference (``PUT /api/config``). Raises ``ConfigError``, nothing changed.
    """
    problems = Resolver(environment).resolve(document.items(s.CONNECTIONS) or [], lines)
    if problems:
        raise ConfigError(problems)
    with transaction.atomic():
        plan = plan_build(document_current(), document, prune=prune)
        Writer(lines, now).apply(plan)
        if dry_run:
            transaction.set_rollback(True)
    return plan


@dataclass(frozen=True)
class Writer:
    """Carries out a plan's changes, turning each refusal into a located ``ConfigError``."""

    lines: Lines
    now: datetime

    def apply(self, plan: Plan) -> None:
        """Creations and updates, section by section; then the settings; then removals."""
        for section in s.SECTIONS:
            write = self._writers()[section.name]
            for change in plan.changes:
                if change.section is section and change.action is not Action.DELETE:
                    self._guarded(change, write)
        self._targets(plan)
        if plan.settings is not None:
            self._settings(plan.settings.patch)
        for section, remove in REMOVERS:
            for change in plan.of(section, Action.DELETE):
                self._guarded(change, self._remover(remove))

    def _remover(self, remove: Remover) -> Callable[[Change, Path], None]:
        return lambda change, path: remove(change.identity, path, self.lines)

    def _writers(self) -> dict[str, Callable[[Change, Path], None]]:
        return {
            s.PROVIDERS.name: self._provider,
            s.CONNECTIONS.name: self._connection,
            s.MODEL_CATALOG.name: self._catalog_entry,
            s.COMBOS.name: self._combo,
            s.CLIENT_KEYS.name: self._client_key,
            s.ERROR_RULES.name: self._rule,
            s.RESTATEMENT_RULES.name: self._rule,
            s.BUILTIN_RULES.name: self._builtin_rule,
            s.FEATURE_FLAGS.name: self._flag,
        }

    def _guarded(self, change: Change, write: Callable[[Change, Path], None]) -> None:
        path: Path = (
            (change.section.name, change.index)
            if change.index is not None
            else (change.section.name, change.section.label(change.identity))
        )
        try:
            write(change, path)
        except ValidationError as error:
            raise self.refused(error, path) from error
        except ProtectedError as error:
            users = ", ".join(sorted({str(row) for row in error.protected_objects}))
            raise ConfigError([self.lines.problem(path, f"still in use by {users}")]) from error

    def refused(self, error: ValidationError, path: Path) -> ConfigError:
        """``error`` as problems at ``path``'s fields."""
        if not hasattr(error, "error_dict"):
            return ConfigError([self.lines.problem(path, " ".join(error.messages))])
        return ConfigError(
            self.lines.problem(
                path if name == NON_FIELD_ERRORS else (*path, RENAMED.get(name, name)),
                " ".join(messages),
            )
            for name, messages in error.message_dict.items()
        )

    def missing(self, path: Path, what: str) -> ConfigError:
        return ConfigError([self.lines.problem(path, f"no {what}")])

    # --- lookups by natural key ---------------------------------------------------------

    def provider(self, slug: str, path: Path) -> Provider:
        found = Provider.objects.filter(pk=slug).first()
        if found is None:
            raise self.missing(path, f"provider '{slug}'")
        return found

    def connection(self, provider: str, name: str, path: Path) -> ProviderConnection:
        found = ProviderConnection.objects.filter(provider_id=provider, name=name).first()
        if found is None:
            raise self.missing(path, f"connection '{name}' of provider '{provider}'")
        return found

    def combo(self, name: str, path: Path) -> Combo:
        found = Combo.objects.filter(name=name).first()
        if found is None:
            raise self.missing(path, f"combo '{name}'")
        return found

    # --- one writer per section ---------------------------------------------------------

    def _provider(self, change: Change, path: Path) -> None:
        row = Provider.objects.filter(pk=change.identity[0]).first() or Provider()
        provider_save(provider=row, fields=dict(_desired(change)))

    def _connection(self, change: Change, path: Path) -> None:
        fields = dict(_desired(change))
        provider = self.provider(fields.pop("provider"), (*path, "provider"))
        secrets = _secret_arguments(change, fields)
        row = ProviderConnection.objects.filter(provider=provider, name=fields["name"]).first()
        connection_save(
            connection=row or ProviderConnection(),
            fields={**fields, "provider": provider},
            secret=secrets["secret"],
            refresh_secret=secrets["refresh_secret"],
        )

    def _catalog_entry(self, change: Change, path: Path) -> None:
        fields = dict(_desired(change))
        provider = self.provider(fields.pop("provider"), (*path, "provider"))
        for name in ("input_price_per_mtok", "output_price_per_mtok"):
            fields[name] = None if fields[name] is None else Decimal(fields[name])
        row = ModelCatalogEntry.objects.filter(provider=provider, model=fields["model"]).first()
        catalog_entry_save(
            entry=row or ModelCatalogEntry(), fields={**fields, "provider": provider}
        )

    def _combo(self, change: Change, path: Path) -> None:
        """The combo's own fields; its targets follow once every combo exists."""
        fields = {k: v for k, v in _desired(change).items() if k != "targets"}
        combo_save(
            combo=Combo.objects.filter(name=fields["name"]).first() or Combo(), fields=fields
        )

    def _targets(self, plan: Plan) -> None:
        for change in plan.changes:
            if change.section is s.COMBOS and (
                change.action is Action.CREATE or "targets" in change.fields
            ):
                self._guarded(change, self._combo_targets)

    def _combo_targets(self, change: Change, path: Path) -> None:
        combo = self.combo(str(change.identity[0]), path)
        targets = [
            self._target(combo, target, (*path, "targets", index))
            for index, target in enumerate(_desired(change)["targets"])
        ]
        combo_save(combo=combo, targets=targets)

    def _target(self, combo: Combo, item: Mapping[str, Any], path: Path) -> dict[str, Any]:
        provider = item["provider"]
        data = {
            "provider": self.provider(provider, (*path, "provider")) if provider else None,
            "model": item["model"],
            "connection": None,
            "combo_ref": self.combo(item["combo"], (*path, "combo")) if item["combo"] else None,
            "weight": item["weight"],
            "fallback_only_on_quota_exhaustion": item["fallback_only_on_quota_exhaustion"],
        }
        if item["connection"]:
            where = (*path, "connection")
            data["connection"] = self.connection(str(provider), item["connection"], where)
        try:
            ComboTarget(combo=combo, **data).full_clean(exclude=["combo"])
        except ValidationError as error:
            raise self.refused(error, path) from error
        return data

    def _client_key(self, change: Change, path: Path) -> None:
        item = _desired(change)
        connections = [
            self.connection(*_provider_and_name(text), (*path, "allowed_connections"))
            for text in item["allowed_connections"]
        ]
        fields = {
            "name": item["name"],
            "scopes": item["scopes"],
            "allowed_models": item["allowed_models"],
            "is_active": item["is_active"],
            "expires_at": moment_value(item["expires_at"]),
        }
        row = ClientApiKey.objects.filter(key_hash=item["key_hash"]).first()
        if row is None:
            row = api_key_restore(
                key_hash=item["key_hash"],
                prefix=item["prefix"],
                allowed_connections=connections,
                **fields,
            )
        else:
            fields["prefix"] = item["prefix"]
            api_key_update(key=row, fields=fields, allowed_connections=connections)
        self._revocation(row, item["revoked"], path)

    def _revocation(self, key: ClientApiKey, revoked: bool, path: Path) -> None:
        if revoked and key.revoked_at is None:
            api_key_revoke(key=key, now=self.now)
        elif not revoked and key.revoked_at is not None:
            message = "a revoked key stays revoked: give revoked: true, or remove the key"
            raise ConfigError([self.lines.problem((*path, "revoked"), message)])

    def _rule(self, change: Change, path: Path) -> None:
        fields = dict(_desired(change))
        key = {"provider": fields["provider"], "rule_id": fields["rule_id"]}
        if change.section is s.ERROR_RULES:
            error_row = ProviderErrorRule.objects.filter(**key).first()
            self._operator_rule(error_row, path)
            error_rule_save(rule=error_row or ProviderErrorRule(), fields=fields)
        else:
            restatement = StatusRestatementRule.objects.filter(**key).first()
            self._operator_rule(restatement, path)
            restatement_rule_save(rule=restatement or StatusRestatementRule(), fields=fields)

    def _operator_rule(
        self, row: ProviderErrorRule | StatusRestatementRule | None, path: Path
    ) -> None:
        if row is not None and row.is_builtin:
            message = "is a built-in rule: switch it on or off under builtin_rules"
            raise ConfigError([self.lines.problem((*path, "rule_id"), message)])

    def _builtin_rule(self, change: Change, path: Path) -> None:
        item = _desired(change)
        key = {"provider": item["provider"], "rule_id": item["rule_id"], "is_builtin": True}
        if item["kind"] == "error":
            error_row = ProviderErrorRule.objects.filter(**key).first()
            if error_row is not None:
                rule_set_enabled(rule=error_row, enabled=item["is_enabled"])
                return
        elif item["kind"] == "restatement":
            restatement = StatusRestatementRule.objects.filter(**key).first()
            if restatement is not None:
                rule_set_enabled(rule=restatement, enabled=item["is_enabled"])
                return
        else:
            message = f"must be one of: {', '.join(s.BUILTIN_KINDS)}"
            raise ConfigError([self.lines.problem((*path, "kind"), message)])
        raise self.missing((*path, "rule_id"), f"built-in {item['kind']} rule of that name")

    def _flag(self, change: Change, path: Path) -> None:
        fields = dict(_desired(change))
        row = FeatureFlag.objects.filter(name=fields["name"]).first()
        feature_flag_save(flag=row or FeatureFlag(), fields=fields)

    def _settings(self, patch: dict[str, Any]) -> None:
        try:
            resilience_settings_update(patch=patch)
        except SettingsError as error:
            raise ConfigError(
                self.lines.problem((s.SETTINGS_SECTION, *field.split(".")), message)
                for field, message in error.errors.items()
            ) from error


def _desired(change: Change) -> Mapping[str, Any]:
    assert change.desired is not None
    return change.desired


def _secret_arguments(change: Change, fields: dict[str, Any]) -> dict[str, str | None]:
    """What ``connection_save`` is given for each secret (popped from ``fields``): ``None``
    keeps the stored one, "" clears it. A secret is written only when it changed, since
    writing one lifts a terminal state."""
    arguments: dict[str, str | None] = {}
    for name in ("secret", "refresh_secret"):
        value = fields.pop(name, None)
        changed = name in change.fields or (change.action is Action.CREATE and bool(value))
        arguments[name] = (value or "") if changed else None
    return arguments


def _provider_and_name(text: str) -> tuple[str, str]:
    provider, _, name = text.partition("/")
    return provider, name
