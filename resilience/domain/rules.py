"""Status restatement and provider error rules, as pure matching.

Provider quirks are data: the rules arrive as frozen dataclasses built from database rows
(built-in rows seeded from the reference's catalog, plus the operator's). Every text match is
a plain case-insensitive substring, never a regular expression, so an operator's rule cannot
be a ReDoS.

- ``apply_restatement``: a provider that misstates a quota error (agentrouter's 403 "额度不足")
  is restated to its real status (429) with a retry-after, before any classification.
- ``match_error_rule``: the first matching rule for a provider, operator rules before built-in
  ones, gives the failure's reason, lock scope and cooldown.
- ``parse_reset_countdown_ms``: "resets in 3 days" → milliseconds.
- ``resolve_rule_match_body`` and ``honors_rule_scope``: the allowlists, where a
  provider flag or an operator rule for the provider opts it in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from resilience.domain.classify.retry_hints import count_of

STATUS_MIN = 100
STATUS_MAX = 599

UNIT_MS: Mapping[str, int] = {
    "day": 86_400_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1_000,
}
# A rule's cooldown, configured or counted down in an upstream's body ("resets in 99999999
# days"), is at most 30 days, as any upstream hint: a lock past the calendar would break every
# read of the connection's state.
MAX_RULE_COOLDOWN_MS = 30 * UNIT_MS["day"]
# A fixed pattern of ours (not an operator's): "reset in 2 hours", "resets in 1 day".
_COUNTDOWN = re.compile(r"resets?\s+in\s+(\d+)\s*(day|hour|minute|second)s?\b")


class RuleScope(StrEnum):
    """What a matching error rule locks: the model, the whole provider or the connection."""

    MODEL = "model"
    PROVIDER = "provider"
    CONNECTION = "connection"


class RuleReason(StrEnum):
    """The failure reason a rule assigns (the classification's vocabulary)."""

    QUOTA_EXHAUSTED = "quota_exhausted"
    RATE_LIMIT_EXCEEDED = "rate_limit_exceeded"
    MODEL_CAPACITY = "model_capacity"
    SERVER_ERROR = "server_error"
    AUTH_ERROR = "auth_error"
    UNKNOWN = "unknown"


class HeaderMatch(StrEnum):
    """How a header rule compares the header's value: the whole value, or a substring."""

    EQUALS = "equals"
    CONTAINS = "contains"


@dataclass(frozen=True, slots=True)
class RestatementRule:
    """One status restatement rule of a provider (a ``StatusRestatementRule`` row)."""

    provider: str
    rule_id: str
    from_statuses: frozenset[int]
    to_status: int
    text_markers: tuple[str, ...]
    exclude_markers: tuple[str, ...] = ()
    default_retry_after_ms: int = 60_000
    position: int = 0
    is_builtin: bool = False

    def matches(self, status: int, haystack: str) -> bool:
        """Status listed, any marker present, no exclude marker (``haystack`` lower-cased)."""
        return (
            status in self.from_statuses
            and _any_in(self.text_markers, haystack)
            and not _any_in(self.exclude_markers, haystack)
        )


@dataclass(frozen=True, slots=True)
class Restated:
    """The status and retry-after the client sees; ``rule_id`` is None on passthrough."""

    status: int
    retry_after_ms: int | None
    rule_id: str | None = None
    from_status: int | None = None


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """One provider error rule (a ``ProviderErrorRule`` row); empty conditions always hold."""

    provider: str
    rule_id: str
    status: int | None = None
    match: str = ""
    header_name: str = ""
    header_value: str = ""
    header_match: HeaderMatch = HeaderMatch.EQUALS
    scope: RuleScope = RuleScope.CONNECTION
    reason: RuleReason = RuleReason.QUOTA_EXHAUSTED
    cooldown_ms: int | None = None
    parse_reset_countdown: bool = False
    position: int = 0
    is_builtin: bool = False

    def conditions_hold(self, status: int, headers: Mapping[str, str], body: str) -> bool:
        """Status, body substring and header all match (``headers`` and ``body`` lower-cased)."""
        return (
            (self.status is None or self.status == status)
            and self.match.lower() in body
            and self._header_holds(headers)
        )

    def _header_holds(self, headers: Mapping[str, str]) -> bool:
        if not self.header_name:
            return True
        value = headers.get(self.header_name.lower())
        if value is None:
            return False
        expected, actual = self.header_value.lower(), value.strip().lower()
        return (
            expected in actual if self.header_match == HeaderMatch.CONTAINS else expected == actual
        )


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """What a matching error rule says about the failure."""

    reason: RuleReason
    scope: RuleScope
    cooldown_ms: int | None
    rule_id: str
    is_operator: bool


def rule_text(value: object) -> str:
    """Text to match against: a string as is, None as "", anything else as JSON.

    Non-ASCII stays as written (like JavaScript's ``JSON.stringify``), so markers such as
    额度不足 still match inside a serialised body.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return json.dumps(value, ensure_ascii=False, default=str)


def restatement_haystack(message: str | None, body: object = None) -> str:
    """The restatement haystack: message + " " + body (string or JSON), trimmed."""
    return f"{message or ''} {rule_text(body)}".strip()


def apply_restatement(
    rules: Iterable[RestatementRule], *, status: int, text: str, retry_after_ms: int | None
) -> Restated:
    """Restate a misstated upstream status with the first matching rule of the provider.

    ``rules`` are the provider's, in order; ``text`` the haystack (any case). On a match the
    status becomes the rule's ``to_status`` and the retry-after stays the upstream's when
    positive, else the rule's default. Otherwise (including an empty haystack) passthrough.
    """
    haystack = text.lower()
    if haystack.strip():
        for rule in rules:
            if rule.matches(status, haystack):
                kept = retry_after_ms is not None and retry_after_ms > 0
                retry = retry_after_ms if kept else rule.default_retry_after_ms
                return Restated(rule.to_status, retry, rule.rule_id, status)
    return Restated(status, retry_after_ms)


def match_error_rule(
    rules: Sequence[ErrorRule], *, status: int, headers: Mapping[str, str], body: object
) -> RuleMatch | None:
    """The first rule of the provider that matches, operator rules before built-in.

    ``rules`` are the provider's, each group in order; ``headers`` any case; ``body`` a string
    or a JSON value. A countdown rule matches only when the body holds a countdown, which is
    then its cooldown. None when nothing matches (an unknown provider has no rules).
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    text = rule_text(body).lower()
    for rule in _operator_first(rules):
        if not rule.conditions_hold(status, lowered, text):
            continue
        cooldown = (
            parse_reset_countdown_ms(text) if rule.parse_reset_countdown else rule.cooldown_ms
        )
        if rule.parse_reset_countdown and cooldown is None:
            continue
        if cooldown is not None:
            cooldown = min(cooldown, MAX_RULE_COOLDOWN_MS)
        return RuleMatch(rule.reason, rule.scope, cooldown, rule.rule_id, not rule.is_builtin)
    return None


def parse_reset_countdown_ms(text: str) -> int | None:
    """ "reset(s) in N day(s)/hour(s)/minute(s)/second(s)" → N in milliseconds; N must be > 0."""
    found = _COUNTDOWN.search(text.lower())
    digits = found.group(1).lstrip("0") if found is not None else ""
    if found is None or not digits:
        return None
    count = count_of(digits)
    return count * UNIT_MS[found.group(2)] if count > 0 else None


def has_operator_rule(rules: Iterable[ErrorRule]) -> bool:
    """Whether any of a provider's rules is the operator's (which opts the provider in)."""
    return any(not rule.is_builtin for rule in rules)


def resolve_rule_match_body(
    provider_full_text: bool,
    has_operator_rule: bool,
    structured: Mapping[str, object] | None,
    text: str | None,
) -> str | Mapping[str, object] | None:
    """What error rules see: the raw text for an opted-in provider, when there is any;
    otherwise the structured ``{code, type}`` error (or None), so body-text rules stay quiet."""
    if (provider_full_text or has_operator_rule) and text:
        return text
    return structured


def honors_rule_scope(provider_flag: bool, has_operator_rule: bool) -> bool:
    """Whether a rule's scope is acted on: the provider's flag, or an operator rule."""
    return provider_flag or has_operator_rule


def _any_in(markers: Iterable[str], haystack: str) -> bool:
    return any(marker and marker.lower() in haystack for marker in markers)


def _operator_first(rules: Sequence[ErrorRule]) -> Iterator[ErrorRule]:
    yield from (rule for rule in rules if not rule.is_builtin)
    yield from (rule for rule in rules if rule.is_builtin)
