"""The one write path for status restatement and provider error rules.

Each write is validated by the model's ``clean()`` (the operator-rule cap, built-in rows frozen
but for ``is_enabled``) and moves the configuration version once the transaction commits, so
the routing snapshot is rebuilt.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction

from omniroute.core.config_version import config_changed
from resilience.models.rules import ProviderErrorRule, StatusRestatementRule

RuleRow = TypeVar("RuleRow", ProviderErrorRule, StatusRestatementRule)


@transaction.atomic
def error_rule_save(
    *, rule: ProviderErrorRule, fields: dict[str, Any] | None = None
) -> ProviderErrorRule:
    """Create or update a provider error rule (``fields`` applied first), validated."""
    return _rule_save(rule, fields)


@transaction.atomic
def error_rule_delete(*, rule: ProviderErrorRule) -> None:
    """Delete an operator error rule; built-in rules are refused (disable them instead)."""
    _rule_delete(rule)


@transaction.atomic
def restatement_rule_save(
    *, rule: StatusRestatementRule, fields: dict[str, Any] | None = None
) -> StatusRestatementRule:
    """Create or update a status restatement rule (``fields`` applied first), validated."""
    return _rule_save(rule, fields)


@transaction.atomic
def restatement_rule_delete(*, rule: StatusRestatementRule) -> None:
    """Delete an operator restatement rule; built-in rules are refused (disable them instead)."""
    _rule_delete(rule)


@transaction.atomic
def rule_set_enabled(*, rule: RuleRow, enabled: bool) -> RuleRow:
    """Enable or disable a rule of either kind; the one change a built-in rule accepts."""
    if rule.is_enabled != enabled:
        rule.is_enabled = enabled
        rule.save(update_fields=["is_enabled"])
        transaction.on_commit(config_changed)
    return rule


def _rule_save(rule: RuleRow, fields: dict[str, Any] | None) -> RuleRow:
    if fields and "is_builtin" in fields:
        raise ValidationError("Only the seed migration makes built-in rules.")
    for name, value in (fields or {}).items():
        setattr(rule, name, value)
    rule.full_clean()
    rule.save()
    transaction.on_commit(config_changed)
    return rule


def _rule_delete(rule: RuleRow) -> None:
    if rule.is_builtin:
        raise ValidationError(f"{rule} is built in: disable it instead of deleting it.")
    rule.delete()
    transaction.on_commit(config_changed)
