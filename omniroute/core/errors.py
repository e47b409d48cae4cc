"""The gateway's own error answers, in the OpenAI shape every app answers in (pure).

Platform-level: routing's proxy and management API, and the lease API, all refuse a request
with ``{"error": {"message", "type", "code"}}`` plus any extra top-level fields.
"""

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
        """The error's JSON body."""
        return error_body(self.message, self.error_type, self.code, **self.extra)


def error_body(message: str, error_type: str, code: str | None, **extra: Any) -> bytes:
    """``{"error": {"message", "type", "code"}}`` plus any extra top-level fields."""
    payload: dict[str, Any] = {"error": {"message": message, "type": error_type, "code": code}}
    payload.update(extra)
    return orjson.dumps(payload)
