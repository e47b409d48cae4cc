"""Shared inputs of the rule tests: the ``0003_rules`` seed, time units, sample bodies and the
seeded error rules of one provider as domain values."""

from __future__ import annotations

import importlib
from typing import Any

from resilience.domain.rules import ErrorRule, HeaderMatch, RuleReason, RuleScope

SEED = importlib.import_module("resilience.migrations.0003_rules")
MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000

QUOTA_TEXT = '{"error": {"message": "用户额度不足, 剩余额度: $0.00"}}'
ORG = {"error": {"code": "organization_quota_exceeded"}}
SEEDED_ROWS = [(row["provider"], row["rule_id"]) for row in SEED.ERROR_RULES]


def _error_rule(row: dict[str, Any], position: int = 0, is_builtin: bool = True) -> ErrorRule:
    fields = dict(row)
    for name, enum in (("header_match", HeaderMatch), ("scope", RuleScope), ("reason", RuleReason)):
        if name in fields:
            fields[name] = enum(fields[name])
    return ErrorRule(position=position, is_builtin=is_builtin, **fields)


def seeded_error_rules(provider: str) -> tuple[ErrorRule, ...]:
    """The seeded error rules of ``provider``, in seed order, as domain values."""
    rows = [row for row in SEED.ERROR_RULES if row["provider"] == provider]
    return tuple(_error_rule(row, position) for position, row in enumerate(rows))
