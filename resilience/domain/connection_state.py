"""A connection's cooldown and terminal state, and how one failure or success changes it (pure).

The state mirrors the connection's durable columns. ``after_failure``
is the reference's markAccountUnavailable minus the storage: the terminal guard, the
anti-thundering-herd guard, terminal resolution, ``disable_cooling`` and the rule-scope
branches. It runs inside one atomic store update, so concurrent failures of one connection are
serialised and raise its backoff level once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from resilience.domain.attribution import TimerClass
from resilience.domain.classify.classifier import Classification, Reason, RuleScope


class TestStatus(StrEnum):
    """A connection's health as last observed; the last three are terminal. Defined once,
    here: routing's models and API take their choices from it."""

    __test__ = False  # not a pytest test class, whatever its name

    ACTIVE = "active"
    UNAVAILABLE = "unavailable"
    BANNED = "banned"
    EXPIRED = "expired"
    CREDITS_EXHAUSTED = "credits_exhausted"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


ACTIVE = TestStatus.ACTIVE
UNAVAILABLE = TestStatus.UNAVAILABLE
BANNED = TestStatus.BANNED
EXPIRED = TestStatus.EXPIRED
CREDITS_EXHAUSTED = TestStatus.CREDITS_EXHAUSTED
TERMINAL = frozenset({BANNED, EXPIRED, CREDITS_EXHAUSTED})
LAST_ERROR_CHARS = 100


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """The durable error state of one connection; times are epoch seconds."""

    test_status: str = ACTIVE
    rate_limited_until: float | None = None
    backoff_level: int = 0
    last_error: str = ""
    last_error_at: float | None = None
    last_error_type: str = ""
    error_code: str = ""
    timer: str = ""  # the class of the cooldown (attribution.TimerClass); "" unknown
    # When the last short upstream hint on the connection runs out (0: none since the last
    # success): a second hinted refusal before then is evidence of a real, account-wide limit.
    # Short-lived: kept in the state store only, never written to the connection's row.
    hinted_until: float = 0.0

    @property
    def is_terminal(self) -> bool:
        return self.test_status in TERMINAL

    @property
    def is_clean(self) -> bool:
        """Nothing to clear: active, no cooldown, no error fields (asked of every answered
        attempt: the clean state itself, as the snapshot holds it, or one equal to it)."""
        return self is CLEAN or self == CLEAN

    def remaining(self, now: float) -> float:
        """Seconds of cooldown left (0 when none or past: lazy recovery, no timer)."""
        if self.rate_limited_until is None:
            return 0.0
        return max(0.0, self.rate_limited_until - now)

    def is_eligible(self, now: float) -> bool:
        return not self.is_terminal and self.remaining(now) <= 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "test_status": self.test_status,
            "rate_limited_until": self.rate_limited_until,
            "backoff_level": self.backoff_level,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_error_type": self.last_error_type,
            "error_code": self.error_code,
            "timer": self.timer,
            "hinted_until": self.hinted_until,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConnectionState:
        until, at = data.get("rate_limited_until"), data.get("last_error_at")
        return cls(
            test_status=str(data.get("test_status") or ACTIVE),
            rate_limited_until=float(until) if isinstance(until, int | float) else None,
            backoff_level=max(0, int(data.get("backoff_level") or 0)),
            last_error=str(data.get("last_error") or ""),
            last_error_at=float(at) if isinstance(at, int | float) else None,
            last_error_type=str(data.get("last_error_type") or ""),
            error_code=str(data.get("error_code") or ""),
            timer=str(data.get("timer") or ""),
            hinted_until=float(data.get("hinted_until") or 0.0),
        )

    def hinted_evidence(self, now: float) -> bool:
        """Whether a short hinted refusal at ``now`` is the connection's second in a row (the
        previous one's hint still runs; a success since would have cleared it)."""
        return self.hinted_until >= now


CLEAN = ConnectionState()
"""The state of a connection with nothing to clear."""


@dataclass(frozen=True, slots=True)
class FailureFacts:
    """What the caller knows of one failure beyond the classification."""

    status: int
    text: str
    error_type: str
    disable_cooling: bool = False
    per_model_quota: bool = False
    never_terminal: bool = False  # the egress-bucketed 429 branch: a cooldown, never terminal
    timer: str = ""  # the class of the cooldown this failure sets


@dataclass(frozen=True, slots=True)
class Marked:
    """The outcome of marking: the new state and what the caller should do next."""

    state: ConnectionState
    fallback: bool
    cooldown_ms: int
    changed: bool
    terminal: str | None = None
    provider_wide: bool = False  # operator scope `provider`: cool every connection
    classification: Classification | None = None


def terminal_status(
    classification: Classification, facts: FailureFacts, credits_signal: bool
) -> str | None:
    """The terminal state, in order: credits exhausted, then banned, then expired; or None."""
    if classification.credits_exhausted:
        return CREDITS_EXHAUSTED
    if not facts.per_model_quota and (facts.status == 402 or credits_signal):
        return CREDITS_EXHAUSTED
    if classification.reason == Reason.NOT_FOUND:
        return None
    if classification.permanent:
        return BANNED
    if facts.status == 401:
        return EXPIRED
    return None


def _connection_scoped_quota(c: Classification) -> bool:
    """The connection-scope consumption guard: a temporary cooldown, never terminal."""
    return (
        c.rule_scope == RuleScope.CONNECTION
        and c.reason == Reason.QUOTA_EXHAUSTED
        and not c.permanent
        and not c.credits_exhausted
    )


def _with_error(
    state: ConnectionState, facts: FailureFacts, level: int, now: float
) -> ConnectionState:
    return replace(
        state,
        last_error=facts.text[:LAST_ERROR_CHARS],
        last_error_at=now,
        last_error_type=facts.error_type,
        error_code=str(facts.status),
        backoff_level=level,
    )


def after_failure(
    state: ConnectionState,
    classification: Classification,
    facts: FailureFacts,
    *,
    now: float,
    credits_signal: bool = False,
) -> Marked:
    """Mark one failure on ``state``, classified at its backoff level."""
    facts = replace(facts, error_type=str(classification.reason))
    if state.is_terminal:
        return Marked(state, True, 0, changed=False, terminal=state.test_status)
    if state.remaining(now) > 0:  # already cooling: no re-mark, no level raised twice
        return Marked(state, True, int(state.remaining(now) * 1000), changed=False)
    if not classification.fallback:
        return Marked(state, False, 0, changed=False, classification=classification)
    scoped = _connection_scoped_quota(classification)
    temporary = scoped or facts.never_terminal
    terminal = None if temporary else terminal_status(classification, facts, credits_signal)
    marked = _persisted(state, classification, facts, terminal, now)
    return replace(marked, classification=classification)


def _persisted(
    state: ConnectionState,
    c: Classification,
    facts: FailureFacts,
    terminal: str | None,
    now: float,
) -> Marked:
    base = _with_error(state, facts, c.new_backoff_level, now)
    provider_wide = c.rule_scope == RuleScope.PROVIDER
    if terminal is not None:
        marked = replace(base, test_status=terminal, rate_limited_until=None)
        return Marked(marked, True, 0, changed=True, terminal=terminal)
    if c.cooldown_ms > 0 and not facts.disable_cooling:
        until = now + c.cooldown_ms / 1000
        marked = replace(base, test_status=UNAVAILABLE, rate_limited_until=until, timer=facts.timer)
        return Marked(marked, True, c.cooldown_ms, changed=True, provider_wide=provider_wide)
    return Marked(replace(base, rate_limited_until=None), True, 0, changed=True)


def cooled_by_provider_rule(
    state: ConnectionState, cooldown_ms: int, now: float
) -> ConnectionState:
    """A sibling cooled by an operator rule of scope ``provider`` (terminal ones untouched)."""
    until = now + cooldown_ms / 1000
    if state.is_terminal or (state.rate_limited_until or 0) >= until:
        return state
    return replace(
        state, test_status=UNAVAILABLE, rate_limited_until=until, timer=TimerClass.OPERATOR
    )
