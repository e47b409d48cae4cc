"""OpenAI-style error bodies and the gateway's own routing errors (pure)."""

from __future__ import annotations

from typing import Any

import orjson


class GatewayError(Exception):
    """A request the gateway answers itself, with an OpenAI-style error."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.error_type = error_type
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> bytes:
        return error_body(self.message, self.error_type, self.code, **self.extra)


def error_body(message: str, error_type: str, code: str | None, **extra: Any) -> bytes:
    """``{"error": {"message", "type", "code"}}`` plus any extra top-level fields."""
    payload: dict[str, Any] = {"error": {"message": message, "type": error_type, "code": code}}
    payload.update(extra)
    return orjson.dumps(payload)


def upstream_error_body(status: int, raw: bytes) -> bytes:
    """An upstream error relayed in OpenAI shape: kept when already shaped, wrapped otherwise."""
    try:
        parsed = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return raw
    text = raw.decode("utf-8", "replace").strip()[:2000] or f"Upstream answered HTTP {status}"
    return error_body(text, _error_type_for(status), f"upstream_{status}")


def _error_type_for(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if status >= 500:
        return "upstream_error"
    return "invalid_request_error"
