"""Under uvicorn the client's address comes from X-Forwarded-For as daphne's ``--proxy-headers``
reads it, and the scheme never from X-Forwarded-Proto (omniroute/uvicorn_server.py)."""

from __future__ import annotations

from typing import Any

from omniroute.uvicorn_server import ForwardedClient, forwarded_client

PROXY = ("10.0.0.2", 41000)


async def seen_scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)

    scope = {"type": "http", "scheme": "http", "client": PROXY, "headers": headers}
    await ForwardedClient(app)(scope, None, None)
    return seen


async def test_the_client_is_the_first_forwarded_address_and_the_scheme_stays() -> None:
    headers = [
        (b"x-forwarded-for", b"203.0.113.7, 10.0.0.1"),
        (b"x-forwarded-port", b"4431"),
        (b"x-forwarded-proto", b"https"),
    ]

    scope = await seen_scope(headers)

    assert scope["client"] == ("203.0.113.7", 4431)
    assert scope["scheme"] == "http"


async def test_without_x_forwarded_for_the_peer_is_the_client() -> None:
    scope = await seen_scope([(b"x-forwarded-proto", b"https")])

    assert scope["client"] == PROXY and scope["scheme"] == "http"


def test_a_port_that_is_not_a_number_reads_as_0() -> None:
    headers = [(b"X-Forwarded-For", b"2001:db8::1"), (b"X-Forwarded-Port", b"http")]

    assert forwarded_client(headers) == ("2001:db8::1", 0)
