"""Status restatement: applied once to every failed upstream response.

It runs right after the response is read and before anything classifies it, streaming or not,
so the client, the breaker, the cooldown and the lockout all see the restated status; the
client is also told the restated ``Retry-After``.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from resilience.domain.rules import MAX_RULE_COOLDOWN_MS, apply_restatement
from routing.domain.attempts.failures import error_parts
from routing.domain.attempts.outcomes import Outcome, OutcomeKind
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def _retry_after_ms(outcome: Outcome) -> int | None:
    """The upstream's ``Retry-After`` in seconds, as milliseconds within the longest cooldown a
    rule may set; ``None`` when it is no such number (an HTTP date, ``²``, 10**400)."""
    raw = (outcome.retry_after or "").strip()
    if _SECONDS.fullmatch(raw) is None:
        return None
    seconds = float(raw)
    if not math.isfinite(seconds):
        return None
    return min(int(seconds * 1000), MAX_RULE_COOLDOWN_MS)


def restate(target: Target, outcome: Outcome, context: AttemptContext) -> Outcome:
    """The outcome as the provider's first matching restatement rule states it."""
    rules = context.facts.snapshot.restatement_rules.get(target.provider.slug)
    if not rules or outcome.kind is not OutcomeKind.HTTP_ERROR or outcome.status is None:
        return outcome
    message, _ = error_parts(outcome.body)
    haystack = f"{message} {outcome.body.decode('utf-8', 'replace')}"
    restated = apply_restatement(
        rules, status=outcome.status, text=haystack, retry_after_ms=_retry_after_ms(outcome)
    )
    if restated.rule_id is None:
        return outcome
    told = None
    if restated.retry_after_ms:
        told = str(max(1, math.ceil(restated.retry_after_ms / 1000)))
    # The rule's default retry-after is only what the client is told; cooldowns and lockouts
    # still read the upstream's own headers.
    return replace(outcome, status=restated.status, client_retry_after=told)
