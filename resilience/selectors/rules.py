"""Reads of the enabled rules, as pure dataclasses for the routing snapshot (sync ORM)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TypeVar

from resilience.domain.rules import ErrorRule, HeaderMatch, RestatementRule, RuleReason, RuleScope
from resilience.models.rules import ProviderErrorRule, StatusRestatementRule

Rule = TypeVar("Rule", ErrorRule, RestatementRule)

RestatementRules = dict[str, tuple[RestatementRule, ...]]
ErrorRules = dict[str, tuple[ErrorRule, ...]]


def restatement_rule_info(row: StatusRestatementRule) -> RestatementRule:
    """The pure rule of a row."""
    return RestatementRule(
        provider=row.provider,
        rule_id=row.rule_id,
        from_statuses=frozenset(int(s) for s in row.from_statuses or ()),
        to_status=row.to_status,
        text_markers=tuple(str(m) for m in row.text_markers or ()),
        exclude_markers=tuple(str(m) for m in row.exclude_markers or ()),
        default_retry_after_ms=row.default_retry_after_ms,
        position=row.position,
        is_builtin=row.is_builtin,
    )


def error_rule_info(row: ProviderErrorRule) -> ErrorRule:
    """The pure rule of a row."""
    return ErrorRule(
        provider=row.provider,
        rule_id=row.rule_id,
        status=row.status,
        match=row.match,
        header_name=row.header_name,
        header_value=row.header_value,
        header_match=HeaderMatch(row.header_match),
        scope=RuleScope(row.scope),
        reason=RuleReason(row.reason),
        cooldown_ms=row.cooldown_ms,
        parse_reset_countdown=row.parse_reset_countdown,
        position=row.position,
        is_builtin=row.is_builtin,
    )


def rules_for_snapshot() -> tuple[RestatementRules, ErrorRules]:
    """The enabled rules by provider, in matching order.

    Restatement rules by position; error rules operator first, then built-in, each by position.
    """
    restatements = StatusRestatementRule.objects.filter(is_enabled=True).order_by(
        "provider", "position", "id"
    )
    errors = ProviderErrorRule.objects.filter(is_enabled=True).order_by(
        "provider", "is_builtin", "position", "id"
    )
    return (
        _by_provider(restatement_rule_info(row) for row in restatements),
        _by_provider(error_rule_info(row) for row in errors),
    )


def _by_provider(rules: Iterable[Rule]) -> dict[str, tuple[Rule, ...]]:
    grouped: defaultdict[str, list[Rule]] = defaultdict(list)
    for rule in rules:
        grouped[rule.provider].append(rule)
    return {provider: tuple(items) for provider, items in grouped.items()}
