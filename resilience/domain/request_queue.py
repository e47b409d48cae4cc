"""The rate-limit queue of each provider connection (the ``requestQueue`` settings
section), pure.

One limiter per provider connection paces the requests sent through it. The queue and its
semaphores are local gates, not upstream failures: every error they make is
request-scoped. It never trips a provider breaker, cools down or disables a connection, or
locks out a model; a combo may try its next target.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_REQUESTS_PER_MINUTE = 100
DEFAULT_MIN_TIME_BETWEEN_REQUESTS_MS = 200
DEFAULT_CONCURRENT_REQUESTS = 10
DEFAULT_MAX_WAIT_MS = 15_000


@dataclass(frozen=True, slots=True)
class RequestQueueSettings:
    """The ``requestQueue`` settings section, already in range.

    * ``auto_enable_api_key_providers``: queue every active API-key provider connection, not
      only those with ``rateLimitProtection`` set. Off by default (the reference
      turns it on, and its 100 rpm / 200 ms defaults then throttled ordinary traffic).
    * ``requests_per_minute``: the most dispatches on a connection in any 60 s (a sliding
      window, across processes: ``routing.domain.attempts.start_log``).
    * ``min_time_between_requests_ms``: the least time between two dispatches on a connection.
    * ``concurrent_requests``: requests in flight at once on a connection (across processes).
    * ``global_concurrent_requests``: requests in flight at once in the whole process, over all
      connections; 0 = no such cap.
    * ``max_wait_ms``: bounds limiter-managed execution, counted from dispatch to
      the upstream's response headers; when it runs out the request fails with
      ``RATE_LIMIT_EXECUTION_TIMEOUT`` (HTTP 504), which fails over like a timeout. Time spent
      queued before dispatch is not bounded by it (``max_queue_depth`` is the queue's bound).
    * ``max_queue_depth``: the most callers queued (waiting, not yet running) on
      one limiter; when it is reached the next caller is rejected at once, before any other
      work on its request, with ``RATE_LIMIT_QUEUE_FULL`` (HTTP 429: the gateway's own queue,
      not an upstream rejection). 0 = unbounded.

    Per-connection overrides (a connection's ``rateLimitOverrides``) are not part of this.
    """

    auto_enable_api_key_providers: bool = False
    requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE
    min_time_between_requests_ms: int = DEFAULT_MIN_TIME_BETWEEN_REQUESTS_MS
    concurrent_requests: int = DEFAULT_CONCURRENT_REQUESTS
    global_concurrent_requests: int = 0
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    max_queue_depth: int = 0

    @property
    def max_wait_seconds(self) -> float:
        """``max_wait_ms`` in seconds (the execution budget of one dispatched request)."""
        return self.max_wait_ms / 1000

    @property
    def min_time_between_requests_seconds(self) -> float:
        return self.min_time_between_requests_ms / 1000

    @property
    def global_concurrency_limit(self) -> int | None:
        """The whole-process cap on requests in flight, or None when there is none."""
        return self.global_concurrent_requests or None

    def admits(self, queued: int) -> bool:
        """Whether one more caller may join a limiter that has ``queued`` callers waiting;
        False means reject it now with ``RATE_LIMIT_QUEUE_FULL``."""
        return self.max_queue_depth <= 0 or queued < self.max_queue_depth
