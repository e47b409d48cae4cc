"""Words for the resilience settings page: a heading per group, a label and a help text per
setting, written for operators who have not read the specifications.

Keys are the document's dotted paths (``resilience.domain.settings.SCHEMA``); a setting missing
here still gets a label made from its name (``label_for``), and a test keeps this table whole.
"""

from __future__ import annotations

import re

from resilience.domain.session_affinity_settings import TTL_HELP

_PROFILE_WORDS = {
    "oauth": "sign-in (OAuth) providers",
    "apikey": "API-key providers",
    "local": "local providers",
}


def _breaker_group(profile: str) -> tuple[str, str]:
    return (
        f"Provider circuit breaker: {_PROFILE_WORDS[profile]}",
        "When a provider keeps failing, the gateway stops sending it requests for a while "
        "(the breaker opens), then lets one trial request through to see whether it recovered.",
    )


def _cooldown_group(profile: str) -> tuple[str, str]:
    return (
        f"Connection cooldown: {_PROFILE_WORDS[profile]}",
        "How long one provider account rests after it is rate limited or fails, before the "
        "gateway routes requests to it again.",
    )


GROUPS: dict[str, tuple[str, str]] = {
    **{f"providerBreaker.{p}": _breaker_group(p) for p in ("oauth", "apikey", "local")},
    "providerCooldown": (
        "Provider-wide cooldown",
        "When the upstream asks every account of a provider to wait, pause the whole provider.",
    ),
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
    "attempts": ("Retries and timeouts", "How hard the gateway tries each upstream."),
    "streamRecovery": (
        "Stream recovery",
        "What the gateway does when a streamed answer breaks off part way.",
    ),
    "streamRecovery.throughputWatchdog": (
        "Stream recovery: slow stream watchdog",
        "Treat a stream that trickles too little text as broken, so it can be recovered.",
    ),
    "requestQueue": (
        "Request queue (rate limiting)",
        "Queue requests per account so the gateway itself stays within an upstream's limits.",
    ),
    "quotaShareConcurrencyLimit": (
        "Shared-quota concurrency",
        "Limit parallel requests on accounts that share one quota.",
    ),
    "comboCooldownWait": (
        "Combo: waiting out a cooldown",
        "When every model of a combo is cooling down, wait for the first to come back instead "
        "of failing at once.",
    ),
    "sessionAffinity": (
        "Session affinity",
        "Keep a conversation on the account that answered it before (helps upstream caching).",
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
    "modelLockout.enabled": (
        "Lock out failing models",
        "Lock a single model on an account when it fails with one of the status codes below.",
    ),
    "modelLockout.errorCodes": (
        "Status codes that lock a model",
        "HTTP status codes from the upstream that lock the model, for example 404, 429.",
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
    "attempts.retriesPerTarget": (
        "Retries per target",
        "Extra attempts on the same account and model before moving to the next one.",
    ),
    "attempts.backoffBaseMs": (
        "Pause between retries (ms)",
        "The first pause between two attempts; later pauses grow from it.",
    ),
    "attempts.maxRetryAfterWaitMs": (
        "Longest wait for a retry-after (ms)",
        "When the upstream asks to retry after a short wait, wait at most this long; a longer "
        "wait moves on to the next target.",
    ),
    "attempts.deadlineMs": (
        "Whole-request deadline (ms)",
        "The most time one client request may take over all its attempts.",
    ),
    "attempts.timeToFirstTokenMs": (
        "Time to the first token (ms)",
        "An attempt that has not started answering by then is abandoned and the next tried.",
    ),
    "attempts.streamIdleMs": (
        "Longest silence in a stream (ms)",
        "A stream that sends nothing for this long is treated as broken.",
    ),
    "attempts.hedgeEnabled": (
        "Hedge a slow first token",
        "When a stream has not started answering after the hedge delay, start the next target "
        "beside it; the first to answer is kept and the other cancelled.",
    ),
    "attempts.hedgeAfterMs": (
        "Hedge delay (ms)",
        "How long a stream waits for its first token before the next target starts beside it, "
        "until the model has a learned first-token time (then three times its recent 95th "
        "percentile, at least 2 000 ms). 0 never hedges.",
    ),
    "attempts.hedgeMaxPercent": (
        "Most hedges per minute (%)",
        "At most this share of a model's attempts in the last minute may be hedges (one a "
        "minute is always allowed while it is above 0). 0 never hedges.",
    ),
    "streamRecovery.enabled": (
        "Recover broken streams",
        "Retry a stream that fails before any text reached the client.",
    ),
    "streamRecovery.continueMidStream": (
        "Continue a stream cut part way",
        "When a stream breaks after text was sent, ask another attempt to continue it so the "
        "client receives one whole answer.",
    ),
    "streamRecovery.throughputWatchdog.enabled": (
        "Watch for slow streams",
        "Treat a stream that delivers too little text for too long as broken.",
    ),
    "streamRecovery.throughputWatchdog.warmupMs": (
        "Grace period at the start (ms)",
        "The watchdog does not judge a stream during its first moments.",
    ),
    "streamRecovery.throughputWatchdog.windowMs": (
        "Measuring window (ms)",
        "The stretch of time over which the stream's speed is measured.",
    ),
    "streamRecovery.throughputWatchdog.minUsefulBytesPerSecond": (
        "Slowest acceptable speed (bytes per second)",
        "Below this speed over the window, the stream counts as stalled.",
    ),
    "streamRecovery.throughputWatchdog.minUsefulBytes": (
        "Least text per window (bytes)",
        "A window that delivers less than this counts as stalled.",
    ),
    "requestQueue.autoEnableApiKeyProviders": (
        "Queue every API-key account",
        "Queue all API-key accounts, not only those with rate-limit protection switched on.",
    ),
    "requestQueue.requestsPerMinute": (
        "Requests per minute per account",
        "How many requests one queued account may send each minute.",
    ),
    "requestQueue.minTimeBetweenRequestsMs": (
        "Least time between requests (ms)",
        "The shortest gap between two requests sent to one account.",
    ),
    "requestQueue.concurrentRequests": (
        "Parallel requests per account",
        "Requests in flight at once on one account.",
    ),
    "requestQueue.globalConcurrentRequests": (
        "Parallel requests in total",
        "Requests in flight at once in the whole gateway process; 0 means no limit.",
    ),
    "requestQueue.maxWaitMs": (
        "Longest run of a queued request (ms)",
        "Counted from sending the request until the upstream starts answering; when it runs "
        "out the request fails over like a timeout.",
    ),
    "requestQueue.maxQueueDepth": (
        "Longest queue",
        "The most requests waiting on one account; the next one is refused at once. 0 means no "
        "limit.",
    ),
    "quotaShareConcurrencyLimit.enabled": (
        "Limit parallel requests on shared quotas",
        "Send requests one slot at a time to accounts that set a parallel-request limit.",
    ),
    "comboCooldownWait.enabled": (
        "Wait for a cooling combo",
        "Wait for the first model of a combo to come back instead of failing at once.",
    ),
    "comboCooldownWait.maxWaitMs": (
        "Longest single wait (ms)",
        "A cooldown that ends later than this is not waited for. 0 turns waiting off.",
    ),
    "comboCooldownWait.maxAttempts": (
        "Most waits per request",
        "How many times one request may wait. 0 turns waiting off.",
    ),
    "comboCooldownWait.budgetMs": (
        "Total waiting per request (ms)",
        "All waits of one request together; at least the longest single wait.",
    ),
    "sessionAffinity.ttlMs": ("Session stickiness (ms)", TTL_HELP),
}


def _words(name: str) -> str:
    """``maxWaitMs`` → "Max wait (ms)": a fallback label for a setting not in the table."""
    unit = " (ms)" if name.endswith("Ms") else ""
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", name.removesuffix("Ms")).lower()
    return words.capitalize() + unit


def label_for(path: str) -> str:
    return FIELDS[path][0] if path in FIELDS else _words(path.rsplit(".", 1)[-1])


def help_for(path: str, own_help: str) -> str:
    return FIELDS[path][1] if path in FIELDS else own_help


def group_heading(group: str) -> tuple[str, str]:
    """The group's heading and one-line description."""
    return GROUPS.get(group, (group, ""))
