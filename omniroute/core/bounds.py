"""Bounds on what a client sends: how deep its JSON may nest, how much of a string it chose (a
model name, a path, an id) the gateway repeats in an error, a header or a log line, and which
text can be a header value as it is (pure; stdlib only).

A hostile client may send a model name of a megabyte or JSON nested a thousand levels deep;
the gateway answers it in a few hundred bytes and never re-encodes what it could not bound.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "MAX_ECHO_CHARS",
    "MAX_ECHO_ITEMS",
    "bounded",
    "clip",
    "has_lone_surrogate",
    "has_unstorable_text",
    "header_text",
    "is_header_value",
    "nesting_exceeds",
    "read_nesting_exceeds",
    "unwritable",
]

DEFAULT_MAX_JSON_DEPTH = 64
# orjson reads JSON nested up to 1 024 levels but writes at most 254: a value parsed from
# deeper JSON raises when the gateway writes it again (an event, an error body).
WRITABLE_DEPTH = 254
_CONTAINERS = (dict, list)  # what nests in parsed JSON
MAX_ECHO_CHARS = 256
MAX_ECHO_ITEMS = 50  # of a list or mapping of errors repeated to a client
ELLIPSIS = "..."  # ASCII: a header value writes it as it is
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's "\ud800" escape parses to one
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # and NUL, which PostgreSQL's jsonb refuses


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(ELLIPSIS)] + ELLIPSIS


def bounded(value: Any) -> Any:
    """An error's details, JSON-shaped, with every string (values and keys) clipped and every
    list and mapping cut to ``MAX_ECHO_ITEMS`` entries. A string that carries a ``code``
    (a framework's error detail) is rebuilt with it, so the code survives the cut."""
    if isinstance(value, str):
        if len(value) <= MAX_ECHO_CHARS:
            return value
        code = getattr(value, "code", None)
        if code is None:
            return clip(value)
        rebuild: Any = type(value)  # a str subclass taking (text, code)
        return rebuild(clip(value), code)
    if isinstance(value, dict):
        items = list(value.items())[:MAX_ECHO_ITEMS]
        return {clip(str(key)): bounded(item) for key, item in items}
    if isinstance(value, list | tuple):
        return [bounded(item) for item in value[:MAX_ECHO_ITEMS]]
    return value


def header_text(text: str) -> bytes:
    """``text`` as a header value: printable ASCII only, anything else written as a Python
    escape (so a CR or LF cannot end the header and a non-Latin-1 character cannot fail it)."""
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    if escaped.isprintable():
        return escaped.encode("ascii")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in escaped).encode("ascii")


def is_header_value(text: str) -> bool:
    """Whether ``text`` can be sent as an HTTP header's value as it is: printable ASCII, with
    no space at either end (which the wire would not keep). A passed client header, a
    connection's secret: one rule for what goes upstream in a header."""
    return text.isascii() and text.isprintable() and text == text.strip()


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether parsed JSON ``value`` nests objects and arrays more than ``limit`` levels deep.

    Level by level (a deep value cannot exhaust the stack), at most ``limit`` levels, each one
    comprehension over the containers of the level above: a coding agent's 150 KB conversation
    costs about a third of what a container-by-container walk did (``OMNIROUTE_MAX_JSON_DEPTH``,
    docs/configuration.md).
    """
    if not isinstance(value, _CONTAINERS):
        return False
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, _CONTAINERS)
        ]
        if not level:
            return False
    return True


def read_nesting_exceeds(raw: bytes, parsed: Any, limit: int) -> bool:
    """:func:`nesting_exceeds` for ``parsed``, read from ``raw``: walked only when ``raw`` holds
    more than ``limit`` brackets at all (each level opens one), so a usual request or answer
    costs two byte counts, and a stream event shorter than ``limit`` bytes (most are) none."""
    if len(raw) <= limit or raw.count(b"{") + raw.count(b"[") <= limit:
        return False
    return nesting_exceeds(parsed, limit)


def unwritable(raw: bytes, parsed: Any) -> bool:
    """Whether ``parsed``, read from ``raw``, nests deeper than orjson writes."""
    return read_nesting_exceeds(raw, parsed, WRITABLE_DEPTH)


def has_lone_surrogate(value: Any) -> bool:
    """Whether a string in parsed JSON ``value`` (a key or a value) holds a lone surrogate:
    text no UTF-8 answer can carry, so an error that repeats it, or a read of a row that
    stored it, would fail."""
    return _strings_match(value, _LONE_SURROGATE)


def has_unstorable_text(value: Any) -> bool:
    """Whether a string in parsed JSON ``value`` holds a lone surrogate or a NUL: what a JSON
    column cannot keep on every backend (PostgreSQL's ``jsonb`` refuses ``\\u0000``)."""
    return _strings_match(value, _UNSTORABLE)


def _strings_match(value: Any, pattern: re.Pattern[str]) -> bool:
    pending = [value]  # a worklist, not recursion: the value may nest deep
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if pattern.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return False
