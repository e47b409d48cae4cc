"""The corpus's cases for the lease API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.e2e.bad_input.case import LEASE, Case, deep

LEASE_PATH = "/api/v1/session-leases"
OWNER = "vlo_" + "A" * 43


def lease_cases() -> Iterator[Case]:
    def case(name: str, status: int, content: bytes, **kw: Any) -> Case:
        headers = {"content-type": "application/json", "x-omniroute-lease-owner": OWNER}
        return Case(
            LEASE,
            name,
            status,
            content,
            path=LEASE_PATH,
            headers=headers | kw.pop("headers", {}),
            **kw,
        )

    acquire = b'{"action": "acquire", "model": "@MODEL@"}'
    for name, content in [
        ("empty body", b""),
        ("null", b"null"),
        ("array", b"[]"),
        ("a lone brace", b"{"),
        ("truncated halfway", acquire[:15]),
        ("invalid UTF-8", b'{"action": "\xff"}'),
        ("a raw NUL", b'{"action": "acq\x00uire"}'),
        ("NaN generation", b'{"action": "renew", "generation": NaN}'),
        ("1e999 generation", b'{"action": "renew", "generation": 1e999}'),
        ("a 5000-digit generation", b'{"action": "renew", "generation": ' + b"9" * 5000 + b"}"),
        ("generation past 2^53", b'{"action": "renew", "generation": 9007199254740993}'),
        ("generation zero", b'{"action": "renew", "generation": 0}'),
        ("generation a string", b'{"action": "renew", "generation": "1"}'),
        ("generation a boolean", b'{"action": "renew", "generation": true}'),
        ("an unknown action", b'{"action": "steal"}'),
        ("action a number", b'{"action": 1}'),
        ("action left out", b'{"model": "@MODEL@"}'),
        ("model left out", b'{"action": "acquire"}'),
        ("model a number", b'{"action": "acquire", "model": 5}'),
        ("model of 60 000 characters", b'{"action": "acquire", "model": "' + b"m" * 60_000 + b'"}'),
        ("nested 65 deep", b'{"action": "status", "generation": 1, "x": ' + deep(65) + b"}"),
        ("nested 1000 deep", b'{"action": "status", "generation": 1, "x": ' + deep(1000) + b"}"),
        ("duplicate action, the last one wrong", b'{"action": "acquire", "action": 1}'),
    ]:
        yield case(name, 400, content)
    yield case("text/plain", 415, acquire, headers={"content-type": "text/plain"})
    yield case("no content type", 415, acquire, headers={"content-type": ""})
    yield case("no key", 401, acquire, auth="none")
    yield case("an unknown key", 401, acquire, auth="wrong")
    yield case(
        "an owner header that is malformed",
        400,
        acquire,
        headers={"x-omniroute-lease-owner": "vlo_short"},
    )
    yield case(
        "an owner header of 400 characters",
        400,
        acquire,
        headers={"x-omniroute-lease-owner": "vlo_" + "a" * 400},
    )
    yield case(
        "an owner header over the header limit",
        431,
        acquire,
        headers={"x-omniroute-lease-owner": "vlo_" + "a" * 9000},
    )
    yield case("an unknown model", 503, b'{"action": "acquire", "model": "no-such/model"}')
