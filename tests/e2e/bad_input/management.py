"""The corpus's cases for the management API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from tests.e2e.bad_input.case import MANAGEMENT, Case, deep


def provider_body(**fields: Any) -> bytes:
    return orjson.dumps({"slug": "corpus-@PROVIDER@", "name": "corpus", **fields})


def management_cases() -> Iterator[Case]:
    def case(name: str, status: int, content: bytes, **kw: Any) -> Case:
        return Case(MANAGEMENT, name, status, content, path="/api/providers/", **kw)

    for name, content in [
        ("empty body", b""),
        ("null", b"null"),
        ("array", b"[]"),
        ("string", b'"hello"'),
        ("a lone brace", b"{"),
        ("truncated halfway", provider_body()[:12]),
        ("trailing garbage", provider_body() + b" xyz"),
        ("invalid UTF-8", b'{"slug": "\xff\xfe", "name": "x"}'),
        ("UTF-16", provider_body().decode().encode("utf-16")),
        ("a raw NUL", b'{"slug": "a\x00b", "name": "x"}'),
        ("an escaped NUL in the slug", provider_body(slug="a\u0000b")),
        ("an escaped NUL in the name", provider_body(name="a\u0000b")),
        ("NaN", b'{"slug": "x", "name": NaN}'),
        ("Infinity", b'{"slug": "x", "name": "x", "max_concurrent": Infinity}'),
        ("1e999", b'{"slug": "x", "name": "x", "max_concurrent": 1e999}'),
        (
            "a 5000-digit integer",
            b'{"slug": "x", "name": "x", "max_concurrent": ' + b"9" * 5000 + b"}",
        ),
        ("a 40-digit integer", b'{"slug": "x", "name": "x", "max_concurrent": ' + b"9" * 40 + b"}"),
        ("nested 65 deep", b'{"slug": "x", "name": ' + deep(65) + b"}"),
        ("nested 1000 deep", b'{"slug": "x", "name": ' + deep(1000) + b"}"),
        ("nested 5000 deep", b'{"slug": "x", "name": ' + deep(5000) + b"}"),
        ("slug left out", orjson.dumps({"name": "x"})),
        ("slug a number", orjson.dumps({"slug": 5, "name": "x"})),
        ("slug an array", orjson.dumps({"slug": ["a"], "name": "x"})),
        ("slug with a space", provider_body(slug="a b")),
        ("slug of 100 000 characters", provider_body(slug="s" * 100_000)),
        ("a wire format that does not exist", provider_body(wire_format="grpc")),
        ("a category that does not exist", provider_body(category="nope")),
        ("only unknown fields", orjson.dumps({"x": 1})),
        ("duplicate slug, the last one wrong", b'{"slug": "ok", "name": "x", "slug": 5}'),
    ]:
        yield case(name, 400, content)
    yield case("text/plain", 415, provider_body(), headers={"content-type": "text/plain"})
    yield case("XML", 415, b"<provider/>", headers={"content-type": "application/xml"})
    yield case(
        "form-encoded, fields missing",
        400,
        b"x=1",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    yield case(
        "multipart with no closing boundary",
        400,
        b"--b\r\nContent-Disposition: form-data; name=slug\r\n\r\nx",
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    yield case("a body over the upload limit", 413, provider_body(name="n" * 3_000_000))
    yield case("no key", 401, provider_body(), auth="none")
    yield case("an unknown key", 401, provider_body(), auth="wrong")
    yield case("a client key without manage", 403, provider_body(), auth="client")
    for name, path, status in [
        ("a connection id that is not a number", "/api/connections/abc/", 404),
        ("a connection id past 64 bits", "/api/connections/99999999999999999999999/", 404),
        ("a negative connection id", "/api/connections/-1/", 404),
        ("a provider slug with an encoded slash", "/api/providers/a%2Fb/", 404),
        ("a provider slug of 8 000 characters", "/api/providers/" + "s" * 8000 + "/", 404),
        ("an unknown area", "/api/nowhere/", 404),
    ]:
        yield Case(MANAGEMENT, name, status, method="GET", path=path)
    for name, content in [
        ("resilience settings, truncated", b'{"attempts": {'),
        ("resilience settings, nested 1000 deep", b'{"attempts": ' + deep(1000) + b"}"),
        ("resilience settings, an array", b"[]"),
    ]:
        yield Case(MANAGEMENT, name, 400, content, method="PATCH", path="/api/resilience")
    yield Case(
        MANAGEMENT,
        "model cooldowns, nested 1000 deep",
        400,
        b'{"provider": ' + deep(1000) + b"}",
        method="DELETE",
        path="/api/resilience/model-cooldowns",
    )
    yield Case(
        MANAGEMENT,
        "keys, scopes a string",
        400,
        orjson.dumps({"name": "k", "scopes": "manage"}),
        path="/api/keys/",
    )
    yield Case(
        MANAGEMENT,
        "keys, scopes of numbers",
        400,
        orjson.dumps({"name": "k", "scopes": [1]}),
        path="/api/keys/",
    )
