"""Knobs: the :class:`Behaviour` of one answer, knob parsing, and the request record."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlencode

import orjson

Phase = Literal["before", "mid"]
# What an ``error_rate`` draw that passes keeps: the shape of the answer, not its failure.
SHAPE_KNOBS: Final = ("latency_ms", "chunks", "chunk_interval_ms", "chunk_size", "error_rate")


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
    error_rate: float | None = None

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"status out of range: {self.status}")
        if self.error_rate is not None and not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be within 0..1, got {self.error_rate}")
        if min(self.latency_ms, self.chunk_interval_ms, self.chunks) < 0 or self.chunk_size < 1:
            raise ValueError("need latency_ms, chunk_interval_ms, chunks >= 0, chunk_size >= 1")

    def with_knobs(self, knobs: Mapping[str, object]) -> Behaviour:
        """A copy with ``knobs`` (strings or JSON values) applied; ValueError if invalid."""
        return dataclasses.replace(self, **{k: _coerce(k, v) for k, v in knobs.items()})

    @property
    def mid(self) -> str | None:
        """The action taken half-way through the answer: reset, stall, cut or None."""
        if self.reset == "mid":
            return "reset"
        return "stall" if self.stall == "mid" else self.cut and "cut"

    @property
    def fails(self) -> bool:
        """True when the answer is not a plain success: non-2xx, own body, reset, stall, cut."""
        abnormal = self.body is not None or not 200 <= self.status < 300
        return abnormal or bool(self.reset or self.stall or self.cut)

    def healthy(self) -> Behaviour:
        """The normal 200 answer of the same shape: only the shaping knobs are kept
        (latency, chunking, ``error_rate``); every other knob is back to its default."""
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


def model_with(name: str, **knobs: object) -> str:
    """A model name carrying knobs, e.g. ``model_with("gpt-4o", status=503)``."""
    return f"{name}?{urlencode(knobs)}" if knobs else name


def checked_knobs(knobs: object) -> dict[str, Any]:
    """``knobs`` as a dict after validating it; ValueError if it is not a valid knob set."""
    if not isinstance(knobs, Mapping):
        raise ValueError(f"a behaviour must be an object of knobs, got {knobs!r}")
    Behaviour().with_knobs(knobs)
    return dict(knobs)


def _int(value: object) -> int:
    return int(str(value))


def _float(value: object) -> float:
    return float(str(value))


def _rate(value: object) -> float | None:
    text = "" if value is None else str(value).strip().lower()
    return None if text in ("", "none") else float(text)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _header_map(value: object) -> dict[str, str]:
    parsed = orjson.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(parsed, Mapping):
        raise ValueError("headers must be a JSON object")
    return {str(k): str(v) for k, v in parsed.items()}


def _choice(*allowed: str) -> Callable[[object], str | None]:
    def parse(value: object) -> str | None:
        text = "" if value is None else str(value).lower()
        if text in ("", "none"):
            return None
        if text not in allowed:
            raise ValueError(f"expected one of {allowed}")
        return text

    return parse


_KNOBS: Final[dict[str, Callable[[object], Any]]] = {
    "status": _int,
    "body": _text,
    "retry_after": _text,
    "headers": _header_map,
    "latency_ms": _float,
    "chunks": _int,
    "chunk_interval_ms": _float,
    "chunk_size": _int,
    "reset": _choice("before", "mid"),
    "stall": _choice("before", "mid"),
    "cut": _choice("mid"),
    "error_rate": _rate,
}


def _coerce(knob: str, value: object) -> Any:
    parse = _KNOBS.get(knob)
    if parse is None:
        raise ValueError(f"unknown fake knob {knob!r}")
    try:
        return parse(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad value for fake knob {knob!r}: {value!r}") from exc
