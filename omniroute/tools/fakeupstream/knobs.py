"""Knob parsing: every knob's name and the parser that turns a string (a header, a query
value) or a JSON value (a script, per-model knobs) into its :class:`Behaviour` field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off", ""})


def _int(value: object) -> int:
    return int(str(value))


def _float(value: object) -> float:
    return float(str(value))


def _unset(value: object) -> bool:
    return value is None or str(value).strip().lower() in ("", "none")


def _optional_int(value: object) -> int | None:
    return None if _unset(value) else _int(value)


def _rate(value: object) -> float | None:
    return None if _unset(value) else float(str(value).strip())


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _bool(value: object) -> bool:
    text = str(value).strip().lower()
    if text not in _TRUE | _FALSE:
        raise ValueError(f"expected a boolean, got {value!r}")
    return text in _TRUE


def _header_map(value: object) -> dict[str, str]:
    parsed = orjson.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(parsed, Mapping):
        raise ValueError("headers must be a JSON object")
    return {str(k): str(v) for k, v in parsed.items()}


def _choice(*allowed: str) -> Callable[[object], str | None]:
    """One of ``allowed``, or None for ``none``/empty (switch a lower-precedence value off)."""

    def parse(value: object) -> str | None:
        if _unset(value):
            return None
        text = str(value).lower()
        if text not in allowed:
            raise ValueError(f"expected one of {allowed}")
        return text

    return parse


def _option(default: str, *others: str) -> Callable[[object], str]:
    """One of ``default, *others``; ``none``/empty means the default."""
    pick = _choice(default, *others)
    return lambda value: pick(value) or default


KNOBS: Final[dict[str, Callable[[object], Any]]] = {
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
    "mid_at": _optional_int,
    "malformed_at": _optional_int,
    "big_event_bytes": _optional_int,
    "done": _option("yes", "close", "hang"),
    "heartbeat_ms": _float,
    "reasoning": _bool,
    "text": _option("default", "alt"),
    "prefill": _option("accept", "reject", "ignore"),
    "error_rate": _rate,
    "max_tools": _optional_int,
}


def coerce(knob: str, value: object) -> Any:
    """The field value of ``knob`` given as ``value``; ValueError if unknown or invalid."""
    parse = KNOBS.get(knob)
    if parse is None:
        raise ValueError(f"unknown fake knob {knob!r}")
    try:
        return parse(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad value for fake knob {knob!r}: {value!r}") from exc
