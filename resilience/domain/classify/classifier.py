"""Failure classification: should the request fall back, and how long does the connection cool
down? The reference's ``checkFallbackError``, pure.

Stdlib only; ``now`` (epoch seconds) and ``tz`` (the gateway's local zone) are passed in. The
provider error rule that matched, if any, arrives as :class:`RuleMatch` (the rule registry is
not ours). Decision order, first match wins:

1. structured code ``executor_contract_violation`` → no fallback, skip the provider breaker.
2. ``invalid_previous_response_binding`` (code, or 409 "previous_response_id does not belong")
   → no fallback, skip the provider breaker.
3. 503 with ``x-omni-fallback-hint: connection_cooldown`` → 5 s, ``service_not_running``.
4. (the per-account rotation gate of the reference is out of scope.)
5. With error text (see ``classifier_text``): a. account deactivated → 1 year, permanent;
   b. 404/410 retired model, or c. endpoint moved → 24 h ``not_found``; d. billing suspension
   → credits exhausted; (e. the Gemini counters are out of scope); f. credits exhausted;
   g. daily quota → local midnight; h. subscription cap → hint or 1 h; i. weekly cap → 24 h;
   j. session cap → 5 h; k. quota text with a reset hint → retryable quota; l. 403 route
   restriction → no fallback; m. 403 + a rule of a scope-honouring provider → the rule;
   n. 403 on an API-key provider → retryable auth. f, g, h and k only when the quota gate is
   open (not a 429, or the 429 preserves quota).
6. The global :data:`ERROR_RULES` (a 429 that does not preserve quota: status rule only).
7. 406 and the retryable statuses → retryable ``server_error``.
8. 432 → subscription cap, hint or 1 h.
9. 400: an operator rule first; model-scoped 400 → ``model_capacity`` 0;
   rate-limit text → retryable; else no fallback.
10. Anything else → the profile's base cooldown, ``unknown``.

Retryable = the upstream hint when the profile uses hints (cooldown = base = hint, level 0),
else :func:`scaled_cooldown_ms`. Where the reference leaves the backoff level unset, the result
carries the input level unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import tzinfo

from resilience.domain.breaker.state import FailureKind
from resilience.domain.classify import rules as rules
from resilience.domain.classify import signals as sig
from resilience.domain.classify.classification import (
    DEFAULT_COOLDOWN_PROFILES,
    Case,
    Classification,
    CooldownProfile,
    FailureInput,
    HintSource,
    Reason,
    RuleMatch,
    RuleScope,
    as_reason,
    hinted,
    preserves_quota,
    retryable,
    rule_verdict,
    scaled_cooldown_ms,
)
from resilience.domain.classify.retry_hints import declared_retry_delay_seconds, header_value
from resilience.domain.classify.text import subscription_cap, text_signals
from resilience.domain.classify.text_match import matches_any

__all__ = [
    "DEFAULT_COOLDOWN_PROFILES",
    "Classification",
    "CooldownProfile",
    "FailureInput",
    "HintSource",
    "Reason",
    "RuleMatch",
    "RuleScope",
    "classify",
    "classify_429_kind",
    "scaled_cooldown_ms",
]

EXECUTOR_CONTRACT_VIOLATION = "executor_contract_violation"
INVALID_PREVIOUS_RESPONSE_BINDING = "invalid_previous_response_binding"
FALLBACK_HINT_HEADER = "x-omni-fallback-hint"
FALLBACK_HINT_CONNECTION_COOLDOWN = "connection_cooldown"
QUOTA_SCALE_RETRY_DELAY_SECONDS = 3600.0


def classify(
    failure: FailureInput,
    profile: CooldownProfile,
    *,
    now: float,
    tz: tzinfo,
    reset_hour: int | None = None,
) -> Classification:
    """Classify one failure (see the module docstring for the order).

    ``reset_hour`` is the operator's daily-reset hour in ``tz`` for tokens-per-day limits; without
    it (or a reset header) a TPD 429 falls through to the short rate-limit path.
    """
    hour = reset_hour if reset_hour is not None and 0 <= reset_hour <= 23 else None
    case = Case(failure, profile, now, tz, hour, preserves_quota(failure, profile))
    for step in _STEPS:
        found = step(case)
        if found is not None:
            return found
    return _other(case)


def classify_429_kind(status: int, text: str) -> FailureKind:
    """The breaker's failure kind of a response: ``transient`` unless 429; terminal
    credit wording → quota; a declared retry window under 1 h → rate limit; quota keywords →
    quota; else rate limit."""
    if status != 429:
        return FailureKind.TRANSIENT
    if sig.is_terminal_quota(text):
        return FailureKind.QUOTA_EXHAUSTED
    delay = declared_retry_delay_seconds(text)
    if delay is not None and delay < QUOTA_SCALE_RETRY_DELAY_SECONDS:
        return FailureKind.RATE_LIMIT
    if sig.looks_like_quota_exhausted(text):
        return FailureKind.QUOTA_EXHAUSTED
    return FailureKind.RATE_LIMIT


# -- steps 1-3 --------------------------------------------------------------------------------


def _contract_violation(case: Case) -> Classification | None:
    if case.failure.structured_code != EXECUTOR_CONTRACT_VIOLATION:
        return None
    return Classification(
        False, 0, case.level, EXECUTOR_CONTRACT_VIOLATION, skip_provider_breaker=True
    )


def _previous_response_binding(case: Case) -> Classification | None:
    coded = case.failure.structured_code == INVALID_PREVIOUS_RESPONSE_BINDING
    worded = case.status == 409 and sig.PREVIOUS_RESPONSE_BINDING_PATTERN.search(case.text)
    if not (coded or worded):
        return None
    reason = Reason.INVALID_PREVIOUS_RESPONSE_BINDING
    return Classification(False, 0, case.level, reason, skip_provider_breaker=True)


def _service_supervisor(case: Case) -> Classification | None:
    value = header_value(case.failure.headers, FALLBACK_HINT_HEADER) or ""
    if case.status != 503 or value.strip().lower() != FALLBACK_HINT_CONNECTION_COOLDOWN:
        return None
    ms = rules.SERVICE_SUPERVISOR_COOLDOWN_MS
    return Classification(
        True, ms, 0, Reason.SERVICE_NOT_RUNNING, skip_provider_breaker=True, base_cooldown_ms=ms
    )


# -- steps 6-10 -------------------------------------------------------------------------------


def _global_rule(case: Case) -> Classification | None:
    status_only = case.status == 429 and not case.preserve_quota
    rule = rules.matching_rule(case.status, case.text, status_only=status_only)
    if rule is None:
        return None
    if rule.backoff:
        return _backoff_rule(case, rule)
    provider_rule = case.failure.rule
    rule_ms = provider_rule.cooldown_ms if provider_rule else None
    cooldown = rule_ms if rule_ms is not None else (rule.cooldown_ms or 0)
    reason = provider_rule.reason if provider_rule else rule.reason
    return Classification(
        True,
        cooldown,
        case.level,
        as_reason(reason),
        base_cooldown_ms=cooldown,
        configured_cooldown_ms=cooldown,
        rule_scope=case.scope,
    )


def _backoff_rule(case: Case, rule: rules.ErrorRule) -> Classification:
    """Retryable with the rule's reason; a provider rule's reason and positive cooldown win."""
    provider_rule = case.failure.rule
    found = retryable(case, provider_rule.reason if provider_rule else rule.reason)
    rule_ms = provider_rule.cooldown_ms if provider_rule else None
    if rule_ms is not None and rule_ms > 0:
        found = replace(
            found,
            cooldown_ms=rule_ms,
            base_cooldown_ms=rule_ms,
            configured_cooldown_ms=rule_ms,
            used_upstream_hint=False,
            hint_source=None,
        )
    return replace(found, rule_scope=case.scope)


def _retryable_status(case: Case) -> Classification | None:
    # Unreachable with the built-in table (every one of these statuses has a rule); kept so the
    # order survives a change to ERROR_RULES.
    if case.status != rules.NOT_ACCEPTABLE and case.status not in rules.RETRYABLE_STATUSES:
        return None
    return retryable(case, Reason.SERVER_ERROR)


def _plan_limit(case: Case) -> Classification | None:
    if case.status != rules.PLAN_LIMIT_EXCEEDED:
        return None
    found = subscription_cap(case)
    if found is not None:
        return found
    hint = case.upstream_hint()
    if hint is not None:
        return hinted(Reason.QUOTA_EXHAUSTED, hint)
    ms = rules.SUBSCRIPTION_COOLDOWN_MS
    return Classification(True, ms, case.level, Reason.QUOTA_EXHAUSTED, base_cooldown_ms=ms)


def _bad_request(case: Case) -> Classification | None:
    if case.status != 400:
        return None
    if case.failure.rule is not None:  # an operator's 400 rule beats built-in patterns
        return rule_verdict(case, case.failure.rule)
    if _is_model_scoped_400(case.failure):
        return Classification(True, 0, case.level, Reason.MODEL_CAPACITY)
    if matches_any(case.text, sig.RATE_LIMIT_TEXT_PATTERNS):
        return retryable(case, Reason.RATE_LIMIT_EXCEEDED)
    return Classification(False, 0, case.level, Reason.UNKNOWN)


def _is_model_scoped_400(failure: FailureInput) -> bool:
    """Another model or provider may accept it: overflow, malformed, parameter limits, model
    access (structured codes first; a bad credential never reads as model access)."""
    text = failure.text
    access = sig.is_model_access_denied(text)
    code = (failure.structured_code or "").lower()
    kind = (failure.structured_type or "").lower()
    structured = (
        code in sig.MODEL_ACCESS_DENIED_CODES
        or kind in sig.MODEL_ACCESS_DENIED_TYPES
        or (kind in sig.MODEL_ACCESS_AMBIGUOUS_TYPES and access)
    )
    patterns = (
        sig.CONTEXT_OVERFLOW_PATTERNS,
        sig.MALFORMED_REQUEST_PATTERNS,
        sig.PARAM_VALIDATION_PATTERNS,
        sig.FUNCTION_DEGRADED_PATTERNS,
    )
    return structured or access or any(matches_any(text, group) for group in patterns)


def _other(case: Case) -> Classification:
    base = case.base_ms
    return Classification(True, base, case.level, Reason.UNKNOWN, base_cooldown_ms=base)


_Step = Callable[[Case], Classification | None]

_STEPS: tuple[_Step, ...] = (
    _contract_violation,
    _previous_response_binding,
    _service_supervisor,
    text_signals,
    _global_rule,
    _retryable_status,
    _plan_limit,
    _bad_request,
)
