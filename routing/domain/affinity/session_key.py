"""A request's session key: what says that two requests belong to one
client session, for the strategies and the affinity that keep a session together (pure).

First hit wins: a session header, then a body field, then a hash of the first input text;
``None`` when the request carries none of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from omniroute.core.digest import sha256_hex

INPUT_KEY_PREFIX = "input:"  # a key hashed from the first input text, not given by the client
SESSION_HEADERS = (b"x-codex-session-id", b"x-session-id", b"x-omniroute-session")
MAX_VALUE_CHARS = 4096
MAX_PLAIN_CHARS = 180
_PLAIN = re.compile(r"[A-Za-z0-9._:-]+")
_TEXT_KEYS = ("text", "content", "prompt")


def _sha256(text: str) -> str:
    return sha256_hex(text.encode())


def normalised(prefix: str, value: object) -> str | None:
    """``<prefix>:<value>`` for a short plain value, ``<prefix>:sha256:<hex>`` for any other
    string; ``None`` for a non-string, an empty or an over-long one."""
    if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
        return None
    value = value.strip()
    if not value:
        return None
    if len(value) <= MAX_PLAIN_CHARS and _PLAIN.fullmatch(value):
        return f"{prefix}:{value}"
    return f"{prefix}:sha256:{_sha256(value)}"


def session_key(payload: Mapping[str, Any], headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The request's session key, or ``None`` (``headers`` as ASGI gives them: lower-case)."""
    given = dict(headers)
    for name in SESSION_HEADERS:
        if name in given:
            key = normalised("header", given[name].decode("latin-1"))
            if key is not None:
                return key
    metadata = payload.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    fields = (
        ("metadata", metadata.get("session_id")),
        ("metadata", metadata.get("sessionId")),
        ("conversation", payload.get("conversation_id")),
        ("session", payload.get("session_id")),
        ("prompt-cache", payload.get("prompt_cache_key")),
    )
    for prefix, value in fields:
        key = normalised(prefix, value)
        if key is not None:
            return key
    text = first_input_text(payload)
    return f"{INPUT_KEY_PREFIX}sha256:{_sha256(text)}" if text else None


def first_input_text(payload: Mapping[str, Any]) -> str | None:
    """The first recognisable input text, bounded, or ``None``."""
    found: str | None = None
    given = payload.get("input")
    if isinstance(given, str):
        found = given[:MAX_VALUE_CHARS]
    elif isinstance(given, list):
        for item in given:
            found = text_of(item.get("content", item) if isinstance(item, Mapping) else item)
            if found:
                break
    if not found and isinstance(payload.get("messages"), list):
        found = text_of(_first_user(payload["messages"], "content"))
    if not found and isinstance(payload.get("contents"), list):
        first = _first_user(payload["contents"], "parts")
        found = text_of({"parts": first} if first is not None else None)
    for name in ("prompt", "query", "instruction"):
        if not found and isinstance(payload.get(name), str):
            found = payload[name][:MAX_VALUE_CHARS]
    return found if found and found.strip() else None


def _first_user(items: list[Any], field: str) -> Any:
    messages = [item for item in items if isinstance(item, Mapping)]
    chosen = next((m for m in messages if m.get("role") == "user"), None)
    if chosen is None and messages:
        chosen = messages[0]
    return chosen.get(field) if chosen is not None else None


def text_of(value: Any) -> str | None:
    """A string as-is; a list's texts joined with newlines (up to 4096 characters); an
    object's ``text``, ``content`` or ``prompt`` string, or its ``parts``. Never a dump of an
    arbitrary object."""
    if isinstance(value, str):
        return value[:MAX_VALUE_CHARS]
    if isinstance(value, list):
        texts: list[str] = []
        size = 0
        for item in value:
            text = item if isinstance(item, str) else _own_text(item)
            if text:
                texts.append(text)
                size += len(text) + 1
                if size >= MAX_VALUE_CHARS:
                    break
        return "\n".join(texts)[:MAX_VALUE_CHARS] or None
    if isinstance(value, Mapping):
        own = _own_text(value)
        if own:
            return own[:MAX_VALUE_CHARS]
        if "parts" in value:
            return text_of(value["parts"])
    return None


def _own_text(item: Any) -> str | None:
    if not isinstance(item, Mapping):
        return None
    return next((item[k] for k in _TEXT_KEYS if isinstance(item.get(k), str)), None)
