"""Step 5 of the failure classifier: what the error text says, pure.

Stdlib only. In order, first match wins: a. account deactivated (built-in or operator signals)
→ 1 year, permanent; b. a retired model on 404/410, or c. a moved endpoint → 24 h
``not_found``; d. billing suspension → credits exhausted; f. credits exhausted; g. daily quota →
until local midnight (TPD: the reset header or the operator's reset hour); h. subscription cap
→ the honoured hint or 1 h; i. weekly cap → 24 h; j. session cap → 5 h; k. quota wording with a
reset hint → retryable quota; l. 403 route restriction → no fallback; m. 403 with a rule of a
scope-honouring provider → the rule; n. 403 on an API-key provider → retryable ``auth_error``.
Steps f, g, h and k need the quota gate open (:attr:`Case.use_quota`). The reference's Gemini
counters (e) and Cloudflare fingerprint test (in n) are provider quirks left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from resilience.domain.classify import rules as rules
from resilience.domain.classify import signals as sig
from resilience.domain.classify.classification import (
    Case,
    Classification,
    Reason,
    hinted,
    retryable,
    rule_verdict,
)
from resilience.domain.classify.retry_hints import (
    ms_until,
    ms_until_next_local_hour,
    ms_until_next_local_midnight,
    reset_at_from_headers,
    text_hint_ms,
)
from resilience.domain.classify.text_match import contains_any

# Nickname providers stay model-scoped on credit wording (the body may be one model's wallet).
COMPATIBLE_PROVIDER_PREFIXES = ("openai-compatible-", "anthropic-compatible-")


def _deactivated(case: Case) -> Classification | None:
    if not sig.is_account_deactivated(case.text, case.failure.banned_signals):
        return None
    ms = rules.PERMANENT_COOLDOWN_MS
    return Classification(True, ms, case.level, Reason.AUTH_ERROR, permanent=True)


def _gone(case: Case) -> Classification | None:
    retired = case.status in (404, 410) and sig.is_model_retired(case.text)
    if not (retired or sig.is_endpoint_moved(case.text)):
        return None
    ms = rules.RETIRED_COOLDOWN_MS
    return Classification(True, ms, case.level, Reason.NOT_FOUND, quota_reset_hint_ms=ms)


def _credits_gone(case: Case) -> Classification:
    ms = rules.PAYMENT_REQUIRED_COOLDOWN_MS
    return Classification(True, ms, case.level, Reason.QUOTA_EXHAUSTED, credits_exhausted=True)


def _billing_suspended(case: Case) -> Classification | None:
    return _credits_gone(case) if sig.is_billing_suspended(case.text) else None


def _credits(case: Case) -> Classification | None:
    compatible = case.failure.provider.lower().startswith(COMPATIBLE_PROVIDER_PREFIXES)
    if not case.use_quota or compatible or not sig.is_credits_exhausted(case.text):
        return None
    return _credits_gone(case)


def _daily(case: Case) -> Classification | None:
    if not (case.use_quota and sig.is_daily_quota_text(case.text)):
        return None
    if sig.is_tpd_text(case.text):
        cooldown = _tpd_cooldown_ms(case)
    else:
        midnight = ms_until_next_local_midnight(now=case.now, tz=case.tz)
        cooldown = min(midnight, rules.DAY_CAP_MS)
    if cooldown is None:  # TPD with no clock and no reset header: the short path
        return None
    reason = Reason.QUOTA_EXHAUSTED
    return Classification(True, cooldown, case.level, reason, daily_quota_exhausted=True)


def _tpd_cooldown_ms(case: Case) -> int | None:
    """A TPD limit resets on the provider's clock: the reset header, else the operator's hour."""
    reset_at = reset_at_from_headers(case.failure.headers, now=case.now, tz=case.tz)
    from_header = ms_until(reset_at, case.now)
    if from_header is not None or case.reset_hour is None:
        return from_header
    return ms_until_next_local_hour(case.reset_hour, now=case.now, tz=case.tz)


def _subscription(case: Case) -> Classification | None:
    text = case.text
    if not case.use_quota or sig.is_credits_exhausted(text) or sig.is_daily_quota_text(text):
        return None
    return subscription_cap(case)


def subscription_cap(case: Case) -> Classification | None:
    """Subscription wording: the upstream hint if honoured, else 1 h; the text's reset kept."""
    if not sig.is_subscription_quota_text(case.text, case.failure.provider):
        return None
    reset_ms = text_hint_ms(case.text, now=case.now, tz=case.tz)
    hint = case.upstream_hint()
    if hint is not None:
        return replace(hinted(Reason.QUOTA_EXHAUSTED, hint), quota_reset_hint_ms=reset_ms)
    ms = rules.SUBSCRIPTION_COOLDOWN_MS
    return Classification(
        True, ms, case.level, Reason.QUOTA_EXHAUSTED, quota_reset_hint_ms=reset_ms
    )


def _weekly(case: Case) -> Classification | None:
    if not sig.is_weekly_cap_text(case.text):
        return None
    return Classification(True, rules.WEEKLY_CAP_COOLDOWN_MS, case.level, Reason.QUOTA_EXHAUSTED)


def _session(case: Case) -> Classification | None:
    if not sig.is_session_cap_text(case.text):
        return None
    return Classification(True, rules.SESSION_CAP_COOLDOWN_MS, case.level, Reason.QUOTA_EXHAUSTED)


def _quota_reset(case: Case) -> Classification | None:
    """Quota wording with a reset hint: retryable quota; the hint is reported even when the
    profile ignores hints for the cooldown."""
    if not case.use_quota or not sig.is_quota_text(case.text):
        return None
    hint = case.hint()
    if hint is None:
        return None
    found = retryable(case, Reason.QUOTA_EXHAUSTED)
    source = found.hint_source or hint.source
    return replace(found, quota_reset_hint_ms=hint.ms, hint_source=source)


def _route_restricted(case: Case) -> Classification | None:
    if case.status != 403 or sig.ROUTE_RESTRICTED_SIGNAL not in case.text.lower():
        return None
    return Classification(False, 0, case.level, Reason.UNKNOWN)


def _forbidden_rule(case: Case) -> Classification | None:
    rule = case.failure.rule
    if case.status != 403 or not case.failure.honors_rule_scope or rule is None:
        return None
    return rule_verdict(case, rule)


def _forbidden_api_key(case: Case) -> Classification | None:
    api_key = bool(case.failure.provider) and case.profile.category != "oauth"
    if case.status != 403 or not api_key or contains_any(case.text, sig.FORBIDDEN_QUOTA_SIGNALS):
        return None
    return retryable(case, Reason.AUTH_ERROR)


_Step = Callable[[Case], Classification | None]

_TEXT_STEPS: tuple[_Step, ...] = (
    _deactivated,
    _gone,
    _billing_suspended,
    _credits,
    _daily,
    _subscription,
    _weekly,
    _session,
    _quota_reset,
    _route_restricted,
    _forbidden_rule,
    _forbidden_api_key,
)


def text_signals(case: Case) -> Classification | None:
    """Step 5: the first text step that decides, or None (also when there is no text)."""
    if not case.text:
        return None
    return next((found for step in _TEXT_STEPS if (found := step(case)) is not None), None)
