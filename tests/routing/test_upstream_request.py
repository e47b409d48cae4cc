"""An upstream request is built whole (``routing.proxy.upstream.client.upstream_request``): the
same request, headers and body as httpx builds from ``content=``, at a third of the CPU."""

from __future__ import annotations

import httpx
import pytest

from routing.proxy.upstream.client import Upstream, rate_limit_headers, upstream_request

BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
HEADERS = {
    "content-type": "application/json",
    "accept": "text/event-stream",
    "authorization": "Bearer sk-upstream-0001",
    "anthropic-beta": "tools-1, cache-2",
}
TIMEOUT = {"connect": 5.0, "read": 60.0, "write": 30.0, "pool": 5.0}


@pytest.mark.parametrize("body", [BODY, b""], ids=["body", "empty"])
def test_the_request_is_the_one_httpx_builds_from_content(body: bytes) -> None:
    url, host = Upstream().url("http://upstream.test:8100/v1", "/chat/completions")
    built = upstream_request(url, host, HEADERS, body, TIMEOUT)
    expected = httpx.Request(
        "POST", url, content=body, headers=HEADERS, extensions={"timeout": TIMEOUT}
    )

    assert sorted(built.headers.raw) == sorted(expected.headers.raw)
    assert built.headers["host"] == "upstream.test:8100"
    assert built.headers["content-length"] == str(len(body))
    assert (built.method, built.url, built.extensions) == (
        "POST",
        expected.url,
        expected.extensions,
    )
    assert built.content is body  # read already, and not copied


def test_the_url_and_its_host_are_parsed_once_per_endpoint() -> None:
    upstream = Upstream()
    first = upstream.url("https://api.example.com/v1", "/messages")

    assert upstream.url("https://api.example.com/v1", "/messages") is first
    assert first[0] == httpx.URL("https://api.example.com/v1/messages")
    assert first[1] == b"api.example.com"


def test_a_successs_rate_limit_headers_are_kept_lower_cased_and_nothing_else() -> None:
    headers = httpx.Headers(
        [
            (b"Content-Type", b"application/json"),
            (b"X-RateLimit-Remaining-Requests", b"25"),
            (b"anthropic-ratelimit-tokens-reset", b"2026-12-07T16:00:00Z"),
            (b"X-Request-Id", b"req-1"),
            (b"x-ratelimit-note", "ré".encode()),  # not ASCII: decoded as httpx decodes it
        ]
    )

    assert rate_limit_headers(headers) == {
        "x-ratelimit-remaining-requests": "25",
        "anthropic-ratelimit-tokens-reset": "2026-12-07T16:00:00Z",
        "x-ratelimit-note": "ré",
    }
    assert rate_limit_headers(httpx.Headers({"content-type": "application/json"})) == {}
