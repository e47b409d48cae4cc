"""Checks shared by the management API tests: the OpenAI-shaped 400 and no secret in a body."""

from __future__ import annotations

from typing import Any


def error_fields(response: Any) -> dict[str, Any]:
    """The ``fields`` of an OpenAI-shaped 400, after checking the shape."""
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("Invalid input")
    fields: dict[str, Any] = error["fields"]
    return fields


def assert_no_leak(response: Any, *secrets: str) -> None:
    """None of ``secrets`` appears anywhere in the response body."""
    for secret in secrets:
        assert secret.encode() not in response.content
