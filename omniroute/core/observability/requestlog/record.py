"""What an app pushes to the request log for one finished request (pure, frozen data).

A record names the key (its name and display prefix, never the secret), the endpoint, the
model asked, the target that answered, the answer's status and error code, its timings, the
tokens the upstream's usage block reported, and the decision trail: every target considered,
tried (with its outcome and status) or skipped (with why). It holds no prompt or completion
text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class StepKind(StrEnum):
    """What happened to one target of the trail."""

    TRIED = "tried"  # an upstream attempt was made
    SKIPPED = "skipped"  # excluded without being tried (a cooldown, an open breaker...)


@dataclass(frozen=True, slots=True)
class TrailStep:
    """One target considered for the request: tried with its outcome, or skipped and why."""

    kind: StepKind
    target: str  # provider/model
    connection_id: int | None
    outcome: str  # the attempt's outcome kind ("success", "http_error"...) or the skip reason
    status: int | None = None  # the upstream's status, for an attempt that got one
    latency_ms: int | None = None
    detail: str = ""  # how an attempt failed ("connect timeout"), or a skip's timer

    def as_json(self) -> dict[str, Any]:
        """The step as the log's JSON trail stores it."""
        return {
            "kind": self.kind.value,
            "target": self.target,
            "connection_id": self.connection_id,
            "outcome": self.outcome,
            "status": self.status,
            "latency_ms": self.latency_ms,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request as the request log keeps it."""

    request_id: str  # the X-OmniRoute-Request-Id the client got
    started_at: float  # wall-clock seconds since the epoch when the request arrived
    endpoint: str
    status: int
    latency_ms: int
    key_name: str = ""
    key_prefix: str = ""
    model: str = ""  # the model the client asked for
    provider: str = ""  # the target that answered: its provider, model and connection
    target_model: str = ""
    connection_id: int | None = None
    connection_name: str = ""
    error_code: str = ""
    time_to_first_token_ms: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    attempts: int = 0
    trail: tuple[TrailStep, ...] = ()
