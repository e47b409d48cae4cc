"""From an attempt's outcome to what the failure classifier and the rules read (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from resilience.domain.classify.classifier import FailureInput
from resilience.domain.classify.classifier import RuleMatch as ClassifierRuleMatch
from resilience.domain.rules import (
    ErrorRule,
    has_operator_rule,
    honors_rule_scope,
    match_error_rule,
    resolve_rule_match_body,
)
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.plan.planning import Target

# A network failure or timeout is classified like the gateway status the client would see.
NETWORK_STATUS = {OutcomeKind.NETWORK_ERROR: 502, OutcomeKind.TIMEOUT: 504}


def error_parts(body: bytes) -> tuple[str, dict[str, Any] | None]:
    """The error message and the structured ``{code, type}`` of an upstream error body."""
    text = body.decode("utf-8", "replace")
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return text, None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        structured = {"code": error.get("code"), "type": error.get("type")}
        return str(error.get("message") or text), structured
    if isinstance(error, str):
        return error, None
    return text, None


def failure_input(
    target: Target, outcome: Outcome, rules: tuple[ErrorRule, ...], banned: tuple[str, ...] = ()
) -> FailureInput:
    """The classifier's input for one failed attempt, with the provider rule that matched."""
    status = outcome.status or NETWORK_STATUS.get(outcome.kind, 502)
    message, structured = error_parts(outcome.body)
    operator = has_operator_rule(rules)
    raw = outcome.body.decode("utf-8", "replace") or outcome.detail
    body = resolve_rule_match_body(target.provider.full_text_rules, operator, structured, raw)
    match = match_error_rule(rules, status=status, headers=outcome.headers, body=body)
    return FailureInput(
        status=status,
        text=raw if target.provider.full_text_rules or operator else (message or outcome.detail),
        headers=dict(outcome.headers),
        structured_code=_text(structured, "code"),
        structured_type=_text(structured, "type"),
        provider=target.provider.slug,
        honors_rule_scope=honors_rule_scope(target.provider.honors_rule_scope, operator),
        rule=_for_classifier(match),
        banned_signals=banned,
    )


def _text(structured: Mapping[str, Any] | None, key: str) -> str | None:
    value = structured.get(key) if structured else None
    return str(value) if value is not None else None


def _for_classifier(match: Any) -> ClassifierRuleMatch | None:
    if match is None:
        return None
    return ClassifierRuleMatch(str(match.reason), match.scope, match.cooldown_ms)
