"""Helpers of the session-affinity consumer tests: three connections of ``acme`` with the TTL
set, and requests that name a session."""

from __future__ import annotations

from collections.abc import Sequence

from omniroute.core.store import StateStore
from resilience.services import resilience_settings_update
from routing.domain.affinity.pins import Pin, pin_hash
from routing.models import ClientApiKey, Provider
from routing.services.affinity import pin_key
from tests.routing.combo_support import KEYS
from tests.routing.harness import (
    ACME_MODEL,
    Gateway,
    Reply,
    add_connection,
    chat,
    communicator,
    read_reply,
    send_body,
)

TTL_MS = 600_000
SESSION_HEADER = b"x-session-id"


def set_ttl(ttl_ms: int = TTL_MS) -> None:
    """Set ``sessionAffinity.ttlMs`` (sync: it writes the settings row)."""
    resilience_settings_update(patch={"sessionAffinity": {"ttlMs": ttl_ms}})


def three_connections(acme: Provider) -> list[int]:
    """Connections a, b, c of ``acme`` (priority 10, 20, 30; secrets ``KEYS``), their ids."""
    return [
        add_connection(acme, name, key, priority=10 * n)
        for n, (name, key) in enumerate(zip("abc", KEYS, strict=True), start=1)
    ]


async def ask(
    gateway: Gateway,
    session: str | None,
    *,
    model: str = ACME_MODEL,
    header: bytes = SESSION_HEADER,
    content: str = "hi",
) -> Reply:
    """One chat request naming ``session`` in ``header`` (``None``: no header)."""
    headers: Sequence[tuple[bytes, bytes]] = [(header, session.encode())] if session else []
    comm = communicator(gateway.app, gateway.key, extra_headers=headers)
    await send_body(comm, chat(model, content=content))
    return await read_reply(comm)


async def served(gateway: Gateway, session: str | None, count: int = 1) -> list[int | None]:
    """The connections that answered ``count`` requests of ``session`` (each a success)."""
    replies = [await ask(gateway, session) for _ in range(count)]
    assert all(reply.status == 200 for reply in replies), [r.body for r in replies]
    return [reply.connection for reply in replies]


async def key_id() -> int:
    """The id of the gateway fixture's client key (sessions are told apart per key)."""
    return (await ClientApiKey.objects.aget(name="client")).pk


async def pinned_to(
    store: StateStore, key: int, session: str, provider: str = "acme"
) -> int | None:
    """The connection the store pins ``session`` (of client key ``key``) to, if any."""
    name = pin_hash(provider, f"{key}:header:{session}")
    pin = Pin.from_dict(await store.get(pin_key(provider, name)))
    return pin.connection_id if pin is not None else None
