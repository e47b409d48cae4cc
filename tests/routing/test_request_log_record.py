"""What the proxy reads off an error answer for the request log: the gateway's error code
(pure; the tokens are ``tests/routing/test_usage.py``'s)."""

from __future__ import annotations

import pytest

from routing.proxy.request_log import error_code


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (
            b'{"error": {"message": "m", "type": "t", "code": "upstream_timeout"}}',
            "upstream_timeout",
        ),
        (b'{"error": {"message": "m", "type": "rate_limit_error"}}', "rate_limit_error"),
        (b'{"error": "plain"}', ""),
        (b"<html>", ""),
    ],
)
def test_the_error_code_is_the_bodys(body: bytes, code: str) -> None:
    assert error_code(body) == code
