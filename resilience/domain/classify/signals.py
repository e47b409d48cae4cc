"""The text signals the failure classifier reads, as pure predicates.

Stdlib only. Plain phrases are matched as case-insensitive substrings; the patterns are our own
fixed regular expressions, compiled once here (never an operator's: operator phrases, such as
the custom banned signals, are substrings too).

Upstream bodies can be large and hostile, so matching stays linear in the text: gaps are
bounded (``[\\s\\S]{0,80}?``), and ``a.*b`` patterns run as ``text_match.InOrder``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from resilience.domain.classify.text_match import Matcher, contains_any, matches_any, pattern

_I = re.IGNORECASE


# -- terminal and billing signals ---------------------------------------------------------------

# Permanent account deactivation. "verify your account to continue" is deliberately absent:
# the newest reference treats it as recoverable, not permanent.
ACCOUNT_DEACTIVATED_SIGNALS: tuple[str, ...] = (
    "account_deactivated",
    "account has been deactivated",
    "account has been disabled",
    "your account has been suspended",
    "this account is deactivated",
    "this service has been disabled in this account",
)

# Credits or billing exhausted: the account does not recover until someone pays. Deliberately
# absent: "resource has been exhausted", "resource_exhausted", "check quota" (Gemini's
# transient per-minute wording).
CREDITS_EXHAUSTED_SIGNALS: tuple[str, ...] = (
    "insufficient_quota",
    "billing_hard_limit_reached",
    "exceeded your current quota",
    "exceeded your current usage quota",
    "credit_balance_too_low",
    "your credit balance is too low",
    "credits exhausted",
    "out of credits",
    "payment required",
    "free tier of the model has been exhausted",
    "tier has been exhausted",
    "insufficient balance",
    "insufficient_balance",
    "insufficient account balance",
    "insufficient credit balance",
    "insufficient credits",
    "insufficient credit",
    "exhausted all your credits",
)

# An OAuth token that a refresh can recover (used by the terminal-state resolution).
OAUTH_INVALID_TOKEN_SIGNALS: tuple[str, ...] = (
    "invalid authentication credentials",
    "oauth 2",
    "login cookie",
    "valid authentication credential",
    "invalid credentials",
)

MODEL_RETIRED_PATTERNS: tuple[Matcher, ...] = (
    re.compile(r"\bno longer available\b", _I),
    re.compile(r"\bno longer supported\b", _I),
    re.compile(r"\breached (?:its |the )?end.?of.?life\b", _I),
    re.compile(r"\bmodel[\s\S]{0,40}?\b(?:deprecated|retired|discontinued|decommissioned)\b", _I),
    re.compile(r"\b(?:deprecated|retired|discontinued|decommissioned)[\s\S]{0,40}?\bmodel\b", _I),
)

ENDPOINT_MOVED_PATTERNS: tuple[Matcher, ...] = (
    re.compile(r"\bendpoint has moved\b", _I),
    re.compile(r"\bno longer works\b", _I),
    re.compile(r"\bupdate your base.?url\b", _I),
)

BILLING_SUSPENDED_PATTERNS: tuple[Matcher, ...] = (
    re.compile(r"\bsuspended\b[\s\S]{0,120}?\b(?:spending limit|billing|invoice|payment)\b", _I),
    re.compile(r"\b(?:spending limit|billing|invoice|payment)\b[\s\S]{0,120}?\bsuspended\b", _I),
)

# -- long-period quota ---------------------------------------------------------------------

QUOTA_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"daily.*limit",
        r"daily.*quota",
        r"per.?day.*limit",
        r"monthly.*limit",
        r"monthly.*quota",
        r"per.?month.*limit",
        r"quota.*exceed",
        r"exceed.*quota",
        r"insufficient.*quota",
        r"billing.*cap",
        r"credit.*exhaust",
        r"out of credits",
        r"hard.?limit",
        r"plan.*limit",
        r"individual quota reached",
        r"enable overages",
        r"INSUFFICIENT_G1_CREDITS_BALANCE",
        r"resource has been exhausted.*reset after",
        r"daily free allocation",
        r"have exhausted their quota",
        r"\"error\"\s*:\s*\"usage limit reached[.\s]*\"",
        r"organization TPD rate limit",
        r"\bTPD rate limit\b",
        r"insufficient balance",
        r"限额将在.*重置",
        r"使用上限",
        r"调用上限",
        r"额度已用尽",
        r"额度已用完",
    )
)

# Never downgraded to a rate limit by a short retry hint: these do not clear on a timer.
TERMINAL_QUOTA_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"INSUFFICIENT_G1_CREDITS_BALANCE",
        r"credit.*exhaust",
        r"out of credits",
        r"billing.*cap",
        r"insufficient.*quota",
        r"individual quota reached",
        r"enable overages",
        r"daily free allocation",
        r"organization TPD rate limit",
        r"\bTPD rate limit\b",
        r"insufficient balance",
    )
)

DAILY_QUOTA_SIGNALS: tuple[str, ...] = (
    "today's quota",
    "daily quota",
    "try again tomorrow",
    "tpd rate limit",
)
TPD_SIGNAL = "tpd rate limit"

SUBSCRIPTION_QUOTA_SIGNALS: tuple[str, ...] = (
    "usage limit reached",
    "usage limit has been",
    "claude pro usage limit",
    "you've reached your usage limit",
    "you have reached your usage limit",
)
# Provider-scoped subscription wording: elsewhere the same phrase is a short per-minute limit.
PROVIDER_SUBSCRIPTION_SIGNALS: dict[str, tuple[str, ...]] = {
    "claude": ("this request would exceed your account's rate limit",),
}
WEEKLY_CAP_SIGNALS: tuple[str, ...] = (
    "weekly usage limit",
    "weekly limit reached",
    "reached your weekly",
)
SESSION_CAP_SIGNALS: tuple[str, ...] = ("session usage limit", "session limit reached")

# Wording that makes the reference's text classifier say quota_exhausted (with the quota
# keywords, the subscription phrases and the credit signals).
QUOTA_TEXT_SIGNALS: tuple[str, ...] = (
    "quota exceeded",
    "quota depleted",
    "quota will reset",
    "quota has been exceeded",
    "hour quota",
    "billing",
)

# -- 403 wording ----------------------------------------------------------------------------------

ROUTE_RESTRICTED_SIGNAL = "not authorized for this route"
# A 403 carrying one of these is a quota 403 (global rules), not an API-key auth failure.
FORBIDDEN_QUOTA_SIGNALS: tuple[str, ...] = (
    "has not been used in project",
    "hour quota",
    "quota has been exceeded",
)
PREVIOUS_RESPONSE_BINDING_PATTERN = re.compile(r"previous_response_id does not belong", _I)

# -- the 400 branch -------------------------------------------------------------------------------

MODEL_ACCESS_DENIED_CODES = frozenset({"model_not_found", "deployment_not_found"})
MODEL_ACCESS_DENIED_TYPES = frozenset({"not_found_error"})
# Anthropic's permission_error also covers key scope and org restrictions: it only counts as a
# model-access denial when the text confirms the model.
MODEL_ACCESS_AMBIGUOUS_TYPES = frozenset({"permission_error"})

CONTEXT_OVERFLOW_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"\binput is too long\b",
        r"\binput too long\b",
        r"\bcontext.*(?:too long|exceeded|overflow|limit)",
        r"\btoo many tokens\b",
        r"\bprompt is too long\b",
        r"\bcontext window",
        r"\bmaximum context",
        r"\bmax.*token",
        r"\btoken limit",
        r"\brequest too large\b",
    )
)

# The provider-wide subset (#10460): the model is not served by this provider at all.
PROVIDER_MODEL_UNSUPPORTED_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"\binvalid model\b",
        r"\bmodel.*not.*(?:available|found|supported|accessible)\b",
        r"\bmodel.*(?:does not exist|doesn't exist)\b",
        r"\bmodel\b[\s\S]{0,80}?\b(?:does\s+not\s+support|doesn't\s+support|unsupported)\b",
        r"\b(?:does\s+not\s+support|doesn't\s+support|unsupported)\b[\s\S]{0,80}?\bmodel\b",
        r"\bunsupported\s+model\b",
        r"\bplease select a different model\b",
    )
)
# The full list adds access/permission phrasings, often an account-scoped entitlement gap.
MODEL_ACCESS_DENIED_PATTERNS: tuple[Matcher, ...] = (
    *PROVIDER_MODEL_UNSUPPORTED_PATTERNS,
    *(
        pattern(source)
        for source in (
            r"\baccess.*denied.*model\b",
            r"\bmodel.*access.*denied\b",
            r"\b(?:access|permission)[\s\S]{0,60}?\bmodel\b",
            r"\bmodel[\s\S]{0,60}?\b(?:access|permission)\b",
        )
    ),
)

AUTH_CREDENTIAL_ERROR_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"\b(?:invalid|incorrect|expired|missing|revoked)\s+api[\s_-]?key\b",
        r"\bapi[\s_-]?key\s+(?:is\s+)?(?:invalid|incorrect|expired|missing|revoked|not\s+valid)\b",
        r"\bauthentication\s+(?:failed|error|required)\b",
        r"\b(?:invalid|expired|missing|revoked)\s+(?:token|credentials?|bearer)\b",
        r"\bunauthorized\b",
        r"\bnot\s+authenticated\b",
    )
)

MALFORMED_REQUEST_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"\bimproperly formed request\b",
        r"\binvalid.*message.*format",
        r"\bmessages must alternate\b",
        r"\bempty (?:message|content)\b",
        r"\bfunction'?s? name (?:can't|can not|is|has) (?:blank|empty|missing)",
        r"function.*name.*(?:blank|empty|missing)",
        r"tool_call.*name.*(?:blank|empty|missing)",
    )
)

PARAM_VALIDATION_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"max_tokens.*illegal",
        r"max_tokens.*must be",
        r"max_tokens.*range",
        r"parameter is illegal",
        r"is illegal.*range",
    )
)

# A backing deployment reported DEGRADED on a 400 (seen on NVIDIA NIM).
FUNCTION_DEGRADED_PATTERNS: tuple[Matcher, ...] = (
    re.compile(r"\bfunction\b[\s\S]{0,80}?\bDEGRADED\b", _I),
    re.compile(r"\bDEGRADED\b[\s\S]{0,80}?\bfunction\b", _I),
)

# Throttling announced on a 400 instead of a 429.
RATE_LIMIT_TEXT_PATTERNS: tuple[Matcher, ...] = (
    re.compile(r"high.?frequency", _I),
    re.compile(r"non-compliant", _I),
    re.compile(r"too many requests", _I),
    re.compile(r"rate.?limit", _I),
    re.compile(r"频繁"),
    re.compile(r"频率"),
)


# -- predicates ---------------------------------------------------------------------------------


def is_account_deactivated(text: str, banned_signals: Iterable[str] = ()) -> bool:
    """Built-in deactivation wording or one of the operator's custom banned signals.

    Blank custom signals are ignored (an empty phrase would otherwise match every text).
    """
    extra = (signal.strip() for signal in banned_signals)
    return contains_any(text, ACCOUNT_DEACTIVATED_SIGNALS) or contains_any(text, extra)


def is_credits_exhausted(text: str) -> bool:
    """Billing credits are gone (CREDITS_EXHAUSTED_SIGNALS)."""
    return contains_any(text, CREDITS_EXHAUSTED_SIGNALS)


def is_oauth_invalid_token(text: str) -> bool:
    """An OAuth token problem a refresh can fix (not a permanent deactivation)."""
    return contains_any(text, OAUTH_INVALID_TOKEN_SIGNALS)


def is_model_retired(text: str) -> bool:
    """The provider has permanently retired the model."""
    return matches_any(text, MODEL_RETIRED_PATTERNS)


def is_endpoint_moved(text: str) -> bool:
    """The provider's endpoint or base URL has moved for good."""
    return matches_any(text, ENDPOINT_MOVED_PATTERNS)


def is_billing_suspended(text: str) -> bool:
    """The account is suspended over billing (spending limit, invoice, payment)."""
    return matches_any(text, BILLING_SUSPENDED_PATTERNS)


def looks_like_quota_exhausted(text: str) -> bool:
    """The body names a long-period cap (the quota keywords)."""
    return bool(text) and matches_any(text, QUOTA_PATTERNS)


def is_terminal_quota(text: str) -> bool:
    """A credit or billing quota signal that no short retry hint may downgrade."""
    return bool(text) and matches_any(text, TERMINAL_QUOTA_PATTERNS)


def is_daily_quota_text(text: str) -> bool:
    """Daily-quota wording (includes the TPD wording)."""
    return contains_any(text, DAILY_QUOTA_SIGNALS)


def is_tpd_text(text: str) -> bool:
    """A tokens-per-day limit, which resets on the provider's clock, not our midnight."""
    return TPD_SIGNAL in text.lower()


def is_subscription_quota_text(text: str, provider: str = "") -> bool:
    """A subscription window is used up ("usage limit reached" and friends)."""
    scoped = PROVIDER_SUBSCRIPTION_SIGNALS.get(provider.lower(), ())
    return contains_any(text, SUBSCRIPTION_QUOTA_SIGNALS) or contains_any(text, scoped)


def is_weekly_cap_text(text: str) -> bool:
    """A weekly usage cap was reached."""
    return contains_any(text, WEEKLY_CAP_SIGNALS)


def is_session_cap_text(text: str) -> bool:
    """A (5 h) session usage cap was reached; bare "session" wording does not count."""
    lower = text.lower()
    both = "reached your session" in lower and "usage limit" in lower
    return both or contains_any(lower, SESSION_CAP_SIGNALS)


def is_quota_text(text: str) -> bool:
    """Whether the text reads as quota exhaustion (the reference's text classifier)."""
    return (
        contains_any(text, QUOTA_TEXT_SIGNALS)
        or looks_like_quota_exhausted(text)
        or is_subscription_quota_text(text)
        or is_credits_exhausted(text)
    )


def is_auth_credential_error(text: str) -> bool:
    """The key or token itself is bad (suppresses the model-access patterns on a 400)."""
    return matches_any(text, AUTH_CREDENTIAL_ERROR_PATTERNS)


def is_model_access_denied(text: str) -> bool:
    """The model is unavailable to this account, unless the text is a bad credential."""
    return not is_auth_credential_error(text) and matches_any(text, MODEL_ACCESS_DENIED_PATTERNS)


def is_provider_model_unsupported_400(status: int, text: str) -> bool:
    """A 400 saying no account of this provider serves the model (the account is not cooled)."""
    if status != 400 or is_auth_credential_error(text):
        return False
    return matches_any(text, PROVIDER_MODEL_UNSUPPORTED_PATTERNS)
