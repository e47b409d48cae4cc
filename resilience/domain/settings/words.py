"""Words for resilience's settings sections on the operator's page: a heading per group, a
label and a help text per setting, written for operators who have not read the specifications.

Keys are the document's dotted paths; ``resilience.domain.settings.document`` hands each
section its part, and a test keeps the tables whole.
"""

from __future__ import annotations

_PROFILE_WORDS = {
    "oauth": "sign-in (OAuth) providers",
    "apikey": "API-key providers",
    "local": "local providers",
}


_BREAKER = (
    "Provider circuit breaker",
    "When a provider keeps failing, the gateway stops sending it requests for a while "
    "(the breaker opens), then lets one trial request through to see whether it recovered.",
)
_COOLDOWN = (
    "Connection cooldown",
    "How long one provider account rests after it is rate limited or fails, before the "
    "gateway routes requests to it again.",
)


def _breaker_group(profile: str) -> tuple[str, str]:
    return f"{_BREAKER[0]}: {_PROFILE_WORDS[profile]}", _BREAKER[1]


def _cooldown_group(profile: str) -> tuple[str, str]:
    return f"{_COOLDOWN[0]}: {_PROFILE_WORDS[profile]}", _COOLDOWN[1]


GROUPS: dict[str, tuple[str, str]] = {
    "providerBreaker": _BREAKER,
    **{f"providerBreaker.{p}": _breaker_group(p) for p in ("oauth", "apikey", "local")},
    "providerCooldown": (
        "Provider-wide cooldown",
        "When the upstream asks every account of a provider to wait, pause the whole provider.",
    ),
    "connectionCooldown": _COOLDOWN,
    **{f"connectionCooldown.{p}": _cooldown_group(p) for p in ("oauth", "apikey")},
    "modelLockout": (
        "Model lockout",
        "Take a single model out on one account (for example, its quota ran out) while the "
        "account's other models keep serving.",
    ),
    "availability": (
        "Availability",
        "How repeated short failures take an account and model out of rotation.",
    ),
}


def _breaker_fields(profile: str) -> dict[str, tuple[str, str]]:
    prefix = f"providerBreaker.{profile}"
    return {
        f"{prefix}.failureThreshold": (
            "Failures before the breaker opens",
            "Failures in a row after which the provider is taken out of rotation.",
        ),
        f"{prefix}.degradationThreshold": (
            "Failures before the provider counts as degraded",
            "Failures in a row after which the provider is still used but flagged as degraded. "
            "Must be lower than the opening threshold.",
        ),
        f"{prefix}.resetTimeoutMs": (
            "Open time before a trial request (ms)",
            "How long an open breaker keeps the provider out before letting one request test it.",
        ),
        f"{prefix}.windowMs": (
            "Failure-rate window (ms)",
            "The breaker also opens when too many recent requests failed; this is how far back "
            "it looks.",
        ),
        f"{prefix}.minimumCalls": (
            "Requests needed before the failure rate counts",
            "The failure rate is ignored until the window holds at least this many requests.",
        ),
        f"{prefix}.failureRatePercent": (
            "Failure rate that opens the breaker (%)",
            "The share of failed requests within the window that opens the breaker.",
        ),
    }


def _cooldown_fields(profile: str) -> dict[str, tuple[str, str]]:
    prefix = f"connectionCooldown.{profile}"
    return {
        f"{prefix}.baseCooldownMs": (
            "First cooldown (ms)",
            "How long an account rests after its first failure; each further failure in a row "
            "doubles it.",
        ),
        f"{prefix}.useUpstreamRetryHints": (
            "Follow the upstream's retry-after",
            "When the upstream says how long to wait, rest exactly that long instead.",
        ),
        f"{prefix}.maxBackoffSteps": (
            "Most doublings of the cooldown",
            "How many times the cooldown may double for repeated failures.",
        ),
        f"{prefix}.useUpstream429BreakerHints": (
            "Let rate-limit answers feed the breaker",
            "Whether a 'too many requests' answer also counts towards opening the provider's "
            "breaker. Unset uses the provider's own default.",
        ),
    }


FIELDS: dict[str, tuple[str, str]] = {
    **{k: v for p in ("oauth", "apikey", "local") for k, v in _breaker_fields(p).items()},
    "providerCooldown.enabled": (
        "Pause the whole provider on request",
        "Honour an upstream's request to pause every account of the provider.",
    ),
    "providerCooldown.minRetryCooldownMs": (
        "Shortest provider pause (ms)",
        "A shorter pause asked for by the upstream is lengthened to this.",
    ),
    "providerCooldown.maxRetryCooldownMs": (
        "Longest provider pause (ms)",
        "A longer pause asked for by the upstream is cut to this.",
    ),
    **{k: v for p in ("oauth", "apikey") for k, v in _cooldown_fields(p).items()},
    "modelLockout.errorCodes": (
        "Status codes that count against a model",
        "HTTP status codes from the upstream that count as a short failure of one model on one "
        "account (a dropped connection always does; a timeout counts as 504); enough of them in "
        "a row rest that pair. A 404 never counts: an unknown model is the request's mistake.",
    ),
    "modelLockout.baseCooldownMs": (
        "First lock duration (ms)",
        "How long a model stays locked after its first failure.",
    ),
    "modelLockout.maxCooldownMs": (
        "Longest lock (ms)",
        "No lock lasts longer than this; it also caps account cooldowns.",
    ),
    "modelLockout.maxBackoffSteps": (
        "Most lengthenings of a lock",
        "How many times a lock may grow for repeated failures of the same model.",
    ),
    "modelLockout.useExponentialBackoff": (
        "Double each lock",
        "Each repeated failure doubles the lock; otherwise it grows by the first duration.",
    ),
    "availability.consecutiveFailures": (
        "Short failures before a model rests",
        "Failures in a row of one model on one account (timeouts, server errors) before that "
        "pair is taken out of rotation for a while.",
    ),
    "availability.transientCooldownBaseMs": (
        "First rest after short failures (ms)",
        "How long such a pair, or an account the gateway rests after short failures, first "
        "stays out. Each failed try after a rest doubles the next one; a success starts again "
        "from this. Must not exceed the longest rest.",
    ),
    "availability.transientCooldownCapMs": (
        "Longest rest after short failures (ms)",
        "The most time such a pair or account stays out, however often it failed.",
    ),
    "availability.panicEnabled": (
        "Try anyway when everything is resting",
        "When every candidate is out only because of the gateway's own timers, send one "
        "request anyway rather than fail.",
    ),
}
