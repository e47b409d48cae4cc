"""Failure attribution: which scope a failed attempt is charged to, and how (pure).

The classifier says what a failure *is*; this
module says *whom it is charged to*, always the narrowest scope the evidence supports:

* ``request``: the request itself was at fault (unknown model, invalid parameters, context
  length, content policy) or the failure says nothing about anyone's health. No state changes.
* ``pair``: the (connection, model) pair. 5xx, timeouts, resets, malformed replies and 429s
  without account-wide evidence. A transient failure is only *counted*; an upstream hint,
  quota text, a retired model or an operator rule of scope ``model`` *locks* the pair at once.
* ``connection`` / ``provider``: account-wide evidence: 401 / 402 / 403 credential and account
  failures, credits, bans, the request-rejected streak, rules of those scopes, and a 429 or
  quota signal on a provider whose quota is not per model. The reference's connection
  cooldowns and terminal states apply.

Each timer carries its class (docs/resilience.md, "Timer classes"): only ``self_set`` timers
are sized by the availability settings (``transientCooldownBaseMs``, doubled per failed probe up to
``transientCooldownCapMs``) and may be overridden by a panic attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from resilience.domain.attempts.tool_limit import is_tool_limit
from resilience.domain.classify import signals as sig
from resilience.domain.classify.classification import Classification, Reason, RuleScope
from resilience.domain.classify.text_match import Matcher, matches_any, pattern


class Scope(StrEnum):
    """Who a failure is charged to."""

    REQUEST = "request"
    PAIR = "pair"
    CONNECTION = "connection"
    PROVIDER = "provider"


class Effect(StrEnum):
    """What charging it did."""

    NONE = "none"
    COUNTED = "counted"
    COOLED = "cooled"
    LOCKED = "locked"
    TERMINAL = "terminal"


class TimerClass(StrEnum):
    """Timer classes: who set a timer, and so whether panic may override it."""

    SELF_SET = "self_set"
    HINTED = "upstream_hinted"
    QUOTA = "quota"
    OPERATOR = "operator"
    TERMINAL = "terminal"
    BREAKER = "breaker"


PANIC_OVERRIDABLE = frozenset({TimerClass.SELF_SET})

# Request-scoped client mistakes.
CONTENT_POLICY_PATTERNS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"content[ _-]?policy",
        r"content[ _-]?filter",
        r"\bflagged\b",
        r"safety (?:system|policy|filter)",
        r"\bresponsible ai\b",
    )
)
FORBIDDEN = "forbidden"
INVALID_REQUEST_STATUSES = frozenset({400, 413, 422})
ACCOUNT_STATUSES = frozenset({401, 402, 403})
QUOTA_STATUSES = frozenset({429, 432})
CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
TOOL_LIMIT = "tool_limit"
# A target that answered one of these cannot serve this request at all (it does not know the
# model, or the prompt is too long for it): it is no reason to refuse while another target,
# held back only by a timer, could still serve.
CANNOT_SERVE_REASONS = frozenset({"model_not_found", "context_length"})


@dataclass(frozen=True, slots=True)
class FailureSignals:
    """What the caller knows of one failure beyond its classification."""

    status: int
    text: str = ""
    structured_code: str | None = None
    network: bool = False  # connect refused, reset, DNS: breaker-relevant on its own
    per_model_quota: bool = True  # 429 / quota evidence is charged per model
    hint_ms: int | None = None  # an upstream retry hint, whatever the profile says
    refusal: bool = False  # the request-rejected streak's signal (account-wide)


@dataclass(frozen=True, slots=True)
class Attribution:
    """The scope of one failure and what the attempt loop and the recorders do with it."""

    scope: Scope
    fail_over: bool  # another target may answer
    transient: bool = False  # counts towards the pair's consecutive failures; may be retried
    lock_ms: int = 0  # a pair lock of this length now (0 with an operator timer: escalated)
    timer: TimerClass | None = None  # the class of the timer this failure sets
    breaker: bool = False  # may count for the provider breaker (subject to its source rule)
    reason: str = ""

    @property
    def request_only(self) -> bool:
        return self.scope is Scope.REQUEST

    @property
    def cannot_serve(self) -> bool:
        """The target cannot serve this request (a model it does not know, a prompt too long
        for it), whatever its health: it does not count as a target able to serve."""
        return self.scope is Scope.REQUEST and self.reason in CANNOT_SERVE_REASONS


def _request(reason: str, *, fail_over: bool) -> Attribution:
    return Attribution(Scope.REQUEST, fail_over, reason=reason)


def _transient(reason: str) -> Attribution:
    return Attribution(Scope.PAIR, True, transient=True, breaker=True, reason=reason)


def _client_mistake(signals: FailureSignals, c: Classification) -> Attribution | None:
    """Failures caused by the request itself: they change no shared state."""
    status, text = signals.status, signals.text
    if status not in INVALID_REQUEST_STATUSES and status != 404:
        return None
    if matches_any(text, CONTENT_POLICY_PATTERNS):
        return _request("content_policy", fail_over=False)
    if status == 400 and is_tool_limit(text):  # this target's limit: another may take it
        return _request(TOOL_LIMIT, fail_over=True)
    code = (signals.structured_code or "").lower()
    if code in CONTEXT_CODES or matches_any(text, sig.CONTEXT_OVERFLOW_PATTERNS):
        return _request("context_length", fail_over=True)
    if status == 404:
        if c.reason == Reason.NOT_FOUND:  # retired model / moved endpoint: the pair
            return Attribution(
                Scope.PAIR,
                True,
                lock_ms=c.cooldown_ms,
                timer=TimerClass.OPERATOR,
                reason=str(c.reason),
            )
        return _request("model_not_found", fail_over=True)
    if c.reason == Reason.RATE_LIMIT_EXCEEDED:  # a 400 that reads as a rate limit
        return None
    if c.fallback and c.reason == Reason.MODEL_CAPACITY:  # another model may accept it
        return _request("model_rejected_request", fail_over=True)
    return _request("invalid_request", fail_over=False)


def _operator_rule(signals: FailureSignals, c: Classification) -> Attribution | None:
    if c.rule_scope is RuleScope.MODEL:  # no cooldown of its own: the lockout's escalation
        reason = FORBIDDEN if signals.status == 403 else str(c.reason)
        return Attribution(
            Scope.PAIR, True, lock_ms=c.cooldown_ms, timer=TimerClass.OPERATOR, reason=reason
        )
    if c.rule_scope is RuleScope.PROVIDER:
        return Attribution(Scope.PROVIDER, True, timer=TimerClass.OPERATOR, reason=str(c.reason))
    if c.rule_scope is RuleScope.CONNECTION:
        return Attribution(Scope.CONNECTION, True, timer=TimerClass.OPERATOR, reason=str(c.reason))
    return None


def _connection_timer(c: Classification) -> TimerClass:
    """The class of a connection-wide timer the classifier set."""
    if c.permanent or c.credits_exhausted:
        return TimerClass.TERMINAL
    if c.used_upstream_hint:
        return TimerClass.HINTED
    if c.reason in (Reason.QUOTA_EXHAUSTED,) or c.daily_quota_exhausted:
        return TimerClass.QUOTA
    if c.reason in (Reason.AUTH_ERROR, Reason.SERVICE_NOT_RUNNING):
        return TimerClass.OPERATOR
    return TimerClass.SELF_SET


def _account(c: Classification) -> Attribution:
    return Attribution(Scope.CONNECTION, True, timer=_connection_timer(c), reason=str(c.reason))


def _quota(signals: FailureSignals, c: Classification) -> Attribution | None:
    """A 429 or quota signal: the pair's, unless the provider's quota is account-wide."""
    quota_text = c.reason == Reason.QUOTA_EXHAUSTED or c.daily_quota_exhausted
    if signals.status not in QUOTA_STATUSES and not quota_text:
        return None
    if not signals.per_model_quota:
        return _account(c)
    if signals.hint_ms:
        return Attribution(
            Scope.PAIR,
            True,
            lock_ms=signals.hint_ms,
            timer=TimerClass.HINTED,
            reason=str(c.reason),
        )
    if quota_text and c.cooldown_ms > 0:
        return Attribution(
            Scope.PAIR, True, lock_ms=c.cooldown_ms, timer=TimerClass.QUOTA, reason=str(c.reason)
        )
    return _transient(str(c.reason) or "rate_limit_exceeded")


def attribute(signals: FailureSignals, c: Classification) -> Attribution:
    """Charge one failed attempt to the narrowest scope its evidence supports."""
    mistake = _client_mistake(signals, c)
    if mistake is not None:
        return mistake
    ruled = _operator_rule(signals, c)
    if ruled is not None:
        return ruled
    if signals.refusal or c.permanent or c.credits_exhausted:
        return _account(c)
    if c.reason == Reason.SERVICE_NOT_RUNNING:  # the local supervisor says the service is down
        return _account(c)
    if signals.status in ACCOUNT_STATUSES:
        if signals.status == 403 and sig.is_model_access_denied(signals.text):
            return _request("model_access_denied", fail_over=True)
        return _account(c) if c.fallback else _request(str(c.reason), fail_over=False)
    quota = _quota(signals, c)
    if quota is not None:
        return quota
    if not c.fallback:
        return _request(str(c.reason), fail_over=False)
    if signals.hint_ms:  # a 5xx with Retry-After: the pair, for exactly that long
        return Attribution(
            Scope.PAIR,
            True,
            lock_ms=signals.hint_ms,
            timer=TimerClass.HINTED,
            reason=str(c.reason),
        )
    return _transient(str(c.reason))
