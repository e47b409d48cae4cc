"""The corpus's cases for the three ``/v1`` wire formats."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.e2e.bad_input.case import Case, deep, replaced, valid, with_member
from tests.e2e.conftest import MAX_BODY_BYTES
from tests.e2e.hostile_support import CHAT, MESSAGES_API, RESPONSES, Surface


def v1_cases(surface: Surface) -> Iterator[Case]:
    s = surface.name
    good = valid(surface)

    def case(name: str, status: int, content: bytes, **kw: Any) -> Case:
        return Case(s, name, status, content, **kw)

    # what is not a JSON object at all
    for name, content in [
        ("empty body", b""),
        ("whitespace only", b"  \n\t "),
        ("null", b"null"),
        ("array", b"[]"),
        ("array holding the request", b"[" + good + b"]"),
        ("string", b'"hello"'),
        ("number", b"42"),
        ("boolean", b"true"),
    ]:
        yield case(name, 400, content)
    # truncated and malformed JSON
    for name, content in [
        ("a lone brace", b"{"),
        ("truncated after a key", b'{"model"'),
        ("truncated in a string", b'{"model": "@MOD'),
        ("truncated halfway", good[: len(good) // 2]),
        ("truncated before the last brace", good[:-1]),
        ("trailing garbage", good + b" xyz"),
        ("two objects", good + good),
        ("single quotes", b"{'model': 'x'}"),
        ("an unquoted key", b"{model: 1}"),
        ("a trailing comma", good[:-1] + b",}"),
        ("a comment", b"// hi\n" + good),
        ("a bad escape", b'{"model": "\\q"}'),
        ("a short unicode escape", b'{"model": "\\u12"}'),
    ]:
        yield case(name, 400, content)
    # encodings
    for name, content in [
        ("invalid UTF-8", good.replace(b'"x"', b'"\xff\xfe"').replace(b"@MODEL@", b"\xc3\x28")),
        ("invalid UTF-8 in the content", good.replace(b'"x"', b'"\xff"')),
        ("an overlong UTF-8 sequence", b'{"model": "\xc0\xaf"}'),
        ("UTF-16", good.decode().encode("utf-16")),
        ("a lone surrogate escape", replaced(surface, "model", b'"\\ud800"')),
        ("a raw NUL inside a string", good.replace(b'"x"', b'"a\x00b"')),
        ("a raw NUL after the object", good + b"\x00"),
        ("a raw control character", good.replace(b'"x"', b'"a\x01b"')),
    ]:
        yield case(name, 400, content)
    # numbers
    for name, value in [
        ("NaN", b"NaN"),
        ("Infinity", b"Infinity"),
        ("-Infinity", b"-Infinity"),
        ("1e999", b"1e999"),
        ("-1e999", b"-1e999"),
        ("a 5000-digit integer", b"9" * 5000),
    ]:
        yield case(f"temperature {name}", 400, with_member(surface, b'"temperature": ' + value))
    # nesting
    for depth in (65, 200, 1000, 1025, 5000):
        yield case(f"nested {depth} deep", 400, with_member(surface, b'"metadata": ' + deep(depth)))
    # the model
    for name, value, status in [
        ("model left out", b"", 400),
        ("model null", b"null", 400),
        ("model a number", b"42", 400),
        ("model a boolean", b"true", 400),
        ("model an array", b'["@MODEL@"]', 400),
        ("model an object", b'{"id": "@MODEL@"}', 400),
        ("model empty", b'""', 400),
        ("model blank", b'"   "', 400),
        ("model unknown", b'"no-such-model"', 404),
        ("model of an unknown provider", b'"no-such-provider/m"', 404),
        ("model naming only the provider", b'"@PROVIDER@/"', 404),
        ("model an escaped NUL", b'"\\u0000"', 404),
        ("model a path", b'"../../etc/passwd"', 404),
        ("model with a newline", b'"a\\nb"', 404),
        ("model in another script", '"模型"'.encode(), 404),
        ("model of 60 000 characters", b'"' + b"m" * 60_000 + b'"', 404),
    ]:
        yield case(name, status, replaced(surface, "model", value))
    # stream and tools
    for name, value in [("a string", b'"yes"'), ("a number", b"1"), ("an object", b"{}")]:
        yield case(f"stream {name}", 400, replaced(surface, "stream", value))
    for name, value in [("a string", b'"tool"'), ("an object", b"{}"), ("a number", b"3")]:
        yield case(f"tools {name}", 400, replaced(surface, "tools", value))
    # duplicate keys: the last one counts
    yield case("duplicate model, the last one wrong", 400, with_member(surface, b'"model": 1'))
    yield case(
        "duplicate model, the last one right",
        200,
        b'{"model": 1, ' + good[1:],
        upstream_due=True,
    )
    # extra fields and null values are passed through: served
    yield case(
        "an unknown extra field",
        200,
        with_member(surface, b'"x_extra": [1, {}]'),
        upstream_due=True,
    )
    yield case("stream null", 200, replaced(surface, "stream", b"null"), upstream_due=True)
    yield case(
        "a huge integer (parsed as a float)",
        200,
        with_member(surface, b'"x_big": ' + b"1" * 40),
        upstream_due=True,
    )
    yield case(
        "nested 64 deep", 200, with_member(surface, b'"metadata": ' + deep(63)), upstream_due=True
    )
    # size
    filler = b"x" * (MAX_BODY_BYTES + 1024)
    yield case("a body over the limit", 413, with_member(surface, b'"pad": "' + filler + b'"'))
    # content types: the body is read as JSON whatever the header says
    yield case(
        "form-encoded",
        400,
        b"model=@MODEL@&messages=x",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    yield case(
        "multipart",
        400,
        b"--b\r\nContent-Disposition: form-data; name=model\r\n\r\nx\r\n--b--\r\n",
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    yield case(
        "JSON sent as text/plain",
        200,
        good,
        headers={"content-type": "text/plain"},
        upstream_due=True,
    )
    # methods
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        yield case(f"method {method}", 405, b"", method=method)
    # credentials
    yield case("no key", 401, good, auth="none")
    yield case("an unknown key", 401, good, auth="wrong")
    yield case("a bearer with no token", 401, good, auth="Bearer")
    yield case("basic credentials", 401, good, auth="Basic dXNlcjpwYXNz")
    yield case("a bearer of 4 000 characters", 401, good, auth="Bearer " + "k" * 4000)
    yield case("a bearer of 9 000 characters", 431, good, auth="Bearer " + "k" * 9000)


def v1_specific_cases() -> Iterator[Case]:
    for surface in (CHAT, MESSAGES_API):
        for name, value in [
            ("left out", b""),
            ("null", b"null"),
            ("a string", b'"hello"'),
            ("empty", b"[]"),
            ("an object", b'{"role": "user"}'),
        ]:
            yield Case(surface.name, f"messages {name}", 400, replaced(surface, "messages", value))
    for name, value in [
        ("left out", b""),
        ("a number", b"5"),
        ("an object", b"{}"),
        ("null", b"null"),
    ]:
        yield Case("responses", f"input {name}", 400, replaced(RESPONSES, "input", value))
    for name, value in [("empty", b'""'), ("a number", b"5"), ("an object", b"{}")]:
        yield Case(
            "responses",
            f"previous_response_id {name}",
            400,
            replaced(RESPONSES, "previous_response_id", value),
        )
    for name, value in [("a string", b'"yes"'), ("a number", b"1")]:
        yield Case("responses", f"background {name}", 400, replaced(RESPONSES, "background", value))
    for name, value in [
        ("zero", b"0"),
        ("negative", b"-1"),
        ("a string", b'"8"'),
        ("a fraction", b"1.5"),
        ("a boolean", b"true"),
        ("too large for an integer", b"1" * 40),
    ]:
        yield Case(
            "messages", f"max_tokens {name}", 400, replaced(MESSAGES_API, "max_tokens", value)
        )
