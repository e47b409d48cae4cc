"""Words for routing's settings sections on the operator's page: a heading per group, a label
and a help text per setting, written for operators who have not read the specifications.

Keys are the document's dotted paths; ``routing.domain.settings.sections`` hands each section
its part, and a test keeps the tables whole.
"""

from __future__ import annotations

from routing.domain.settings.session_affinity import TTL_HELP

GROUPS: dict[str, tuple[str, str]] = {
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

FIELDS: dict[str, tuple[str, str]] = {
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
