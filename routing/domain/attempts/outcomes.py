"""What one upstream attempt produced, and whether the attempt loop moves on (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

RETRY_AFTER = "retry-after"


class OutcomeKind(StrEnum):
    """The family of an attempt's result."""

    SUCCESS = "success"
    HTTP_ERROR = "http_error"
    NETWORK_ERROR = "network_error"
    TIMEOUT = "timeout"
    LOCAL = "local"  # a local gate refused or timed out: request-scoped, never recorded


@dataclass(frozen=True, slots=True)
class Outcome:
    """One attempt's result as recorders and the failover decision see it."""

    kind: OutcomeKind
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    detail: str = ""
    latency_ms: int = 0
    client_retry_after: str | None = None  # what the client is told, when restated
    stream_started: bool = False  # a stream answered 2xx, then failed before its first token

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.SUCCESS

    @property
    def retry_after(self) -> str | None:
        return self.headers.get(RETRY_AFTER)


FAILOVER_STATUSES = frozenset({408, 429})


def should_fail_over(outcome: Outcome) -> bool:
    """Move to the next target on a network failure, a timeout, a local gate's refusal, a
    408/429 or any 5xx."""
    if outcome.kind in (OutcomeKind.NETWORK_ERROR, OutcomeKind.TIMEOUT, OutcomeKind.LOCAL):
        return True
    status = outcome.status or 0
    return outcome.kind is OutcomeKind.HTTP_ERROR and (status in FAILOVER_STATUSES or status >= 500)
