"""Knobs: the :class:`Behaviour` of one answer, knob parsing, and the request record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlencode

from omniroute.tools.fakeupstream.knobs import coerce

Phase = Literal["before", "mid"]
# What an ``error_rate`` draw that passes keeps: the shape of the answer and what the model
# can do (text, reasoning, prefill support, how many tools), not its failure.
SHAPE_KNOBS: Final = (
    "latency_ms",
    "chunks",
    "chunk_interval_ms",
    "chunk_size",
    "mid_at",
    "heartbeat_ms",
    "reasoning",
    "text",
    "prefill",
    "error_rate",
    "max_tools",
)


@dataclass(frozen=True, slots=True)
class Behaviour:
    """The effective knobs of one answer; see the package docstring."""

    status: int = 200
    body: str | None = None
    retry_after: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    latency_ms: float = 0.0
    chunks: int = 20
    chunk_interval_ms: float = 0.0
    chunk_size: int = 8
    reset: Phase | None = None
    stall: Phase | None = None
    cut: Literal["mid"] | None = None
    mid_at: int | None = None
    malformed_at: int | None = None
    big_event_bytes: int | None = None
    done: Literal["yes", "close", "hang"] = "yes"
    heartbeat_ms: float = 0.0
    reasoning: bool = False
    text: Literal["default", "alt"] = "default"
    prefill: Literal["accept", "reject", "ignore"] = "accept"
    error_rate: float | None = None
    max_tools: int | None = None

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"status out of range: {self.status}")
        if self.error_rate is not None and not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be within 0..1, got {self.error_rate}")
        if min(self.latency_ms, self.chunk_interval_ms, self.chunks) < 0 or self.chunk_size < 1:
            raise ValueError("need latency_ms, chunk_interval_ms, chunks >= 0, chunk_size >= 1")
        counts = (self.mid_at, self.malformed_at, self.big_event_bytes, self.max_tools)
        if min(count or 0 for count in counts) < 0:
            raise ValueError("need mid_at, malformed_at, big_event_bytes, max_tools >= 0")
        if self.heartbeat_ms < 0:
            raise ValueError("need heartbeat_ms >= 0")

    def with_knobs(self, knobs: Mapping[str, object]) -> Behaviour:
        """A copy with ``knobs`` (strings or JSON values) applied; ValueError if invalid."""
        return dataclasses.replace(self, **{k: coerce(k, v) for k, v in knobs.items()})

    @property
    def mid(self) -> str | None:
        """The action taken part-way through the answer (``mid_at``, default half-way):
        reset, stall, cut or None."""
        if self.reset == "mid":
            return "reset"
        return "stall" if self.stall == "mid" else self.cut and "cut"

    @property
    def fails(self) -> bool:
        """True when the answer is not a plain success: non-2xx, own body, reset, stall, cut,
        a malformed or oversized event or a stream without ``[DONE]``."""
        abnormal = self.body is not None or not 200 <= self.status < 300
        odd_event = self.malformed_at is not None or self.big_event_bytes is not None
        broken = odd_event or self.done != "yes"
        return abnormal or broken or bool(self.reset or self.stall or self.cut)

    def healthy(self) -> Behaviour:
        """The normal 200 answer of the same shape: only :data:`SHAPE_KNOBS` are kept
        (latency, chunking, text, reasoning, prefill, ``error_rate``, ``max_tools``); every
        other knob is back to its default."""
        return dataclasses.replace(Behaviour(), **{k: getattr(self, k) for k in SHAPE_KNOBS})


@dataclass(slots=True)
class RequestRecord:
    """One request as seen by the fake; updated while its answer is in flight."""

    at: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    behaviour: Behaviour
    model: str = ""
    stream: bool = False
    chunks_sent: int = 0
    last_chunk_at: float | None = None
    completed: bool = False
    disconnected_at: float | None = None
    aborted_at: float | None = None
    prefill: str | None = None
    pings_sent: int = 0
    finished_at: float | None = None  # when its answer was written in full (or it ended)
    peer: str = ""  # the client's "host:port": one per TCP connection, pooled or not

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` (empty when absent or not a list)."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return messages if isinstance(messages, list) else []


def model_with(name: str, **knobs: object) -> str:
    """A model name carrying knobs, e.g. ``model_with("gpt-4o", status=503)``."""
    return f"{name}?{urlencode(knobs)}" if knobs else name


def checked_knobs(knobs: object) -> dict[str, Any]:
    """``knobs`` as a dict after validating it; ValueError if it is not a valid knob set."""
    if not isinstance(knobs, Mapping):
        raise ValueError(f"a behaviour must be an object of knobs, got {knobs!r}")
    Behaviour().with_knobs(knobs)
    return dict(knobs)
