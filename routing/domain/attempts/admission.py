"""Request-queue admission, and the errors local gates
make (pure). Local gate errors are request-scoped: the attempt loop never records them
against a connection, a model or a breaker."""

from __future__ import annotations

from typing import Any

from routing.domain.client.errors import error_body

QUEUE_FULL = "RATE_LIMIT_QUEUE_FULL"
EXECUTION_TIMEOUT = "RATE_LIMIT_EXECUTION_TIMEOUT"


def check_queue_admission(queued: int, max_queue_depth: int, identity: str) -> str | None:
    """``None`` when a caller may join a queue that has ``queued`` waiting; else why not.
    ``max_queue_depth`` 0 admits everyone."""
    if max_queue_depth <= 0 or queued < max_queue_depth:
        return None
    return (
        f"OmniRoute's local request queue for {identity} is full ({max_queue_depth} waiting, "
        "requestQueue.maxQueueDepth); this is the gateway's own limit, not an upstream "
        "rejection."
    )


def local_error_body(
    message: str, code: str, error_type: str = "rate_limit_error", **extra: Any
) -> bytes:
    """The OpenAI-style body of a local gate's error (with any ``extra`` top-level fields)."""
    return error_body(message, error_type, code, **extra)
