"""The window gate's state in the store: a failure window per provider, a record per key."""

from __future__ import annotations

from omniroute.core.store import Json, StateStore, Updater
from resilience.domain.window_gate import (
    WindowGatePolicy,
    connection_remaining,
    provider_remaining,
)

GATE_PREFIX = "gate:"
# The exclusion reasons the window gate gives.
PROVIDER_COOLDOWN = "provider_cooldown"
CONNECTION_COOLDOWN = "connection_cooldown"


def _key(provider: str, connection_id: int | None = None) -> str:
    suffix = "" if connection_id is None else f":{connection_id}"
    return f"{GATE_PREFIX}{provider}{suffix}"


def _bump(now: float) -> Updater:
    def updater(raw: Json | None) -> Json | None:
        count = raw.get("count", 0) if isinstance(raw, dict) else 0
        return {"count": int(count) + 1 if isinstance(count, int) else 1, "last": now}

    return updater


async def window_gate_record_failure(
    *, store: StateStore, provider: str, connection_id: int | None, policy: WindowGatePolicy
) -> None:
    """Remember one failure of ``provider`` (and of its connection, when known)."""
    now = store.clock()
    await store.window_add(_key(provider), window=policy.failure_window)
    await store.update(_key(provider), _bump(now), ttl=policy.retention)
    if connection_id is not None:
        await store.update(_key(provider, connection_id), _bump(now), ttl=policy.retention)


async def window_gate_record_success(
    *, store: StateStore, provider: str, connection_id: int | None
) -> None:
    """A success clears the provider's window and count (and the connection's)."""
    await store.window_clear(_key(provider))
    await store.delete(_key(provider))
    if connection_id is not None:
        await store.delete(_key(provider, connection_id))


def _fields(raw: Json | None) -> tuple[int, float | None]:
    if not isinstance(raw, dict):
        return 0, None
    count, last = raw.get("count"), raw.get("last")
    return (count if isinstance(count, int) else 0), (
        float(last) if isinstance(last, int | float) else None
    )


async def window_gate_remaining(
    *, store: StateStore, provider: str, connection_id: int | None, policy: WindowGatePolicy
) -> tuple[str, float] | None:
    """Why and how long the gate holds this target, or ``None`` when it may be tried."""
    now = store.clock()
    _, last = _fields(await store.get(_key(provider)))
    if last is not None:
        in_window = await store.window_count(_key(provider), window=policy.failure_window)
        remaining = provider_remaining(in_window, last, policy, now)
        if remaining > 0:
            return PROVIDER_COOLDOWN, remaining
    if connection_id is None:
        return None
    count, last = _fields(await store.get(_key(provider, connection_id)))
    remaining = connection_remaining(count, last, policy, now)
    return (CONNECTION_COOLDOWN, remaining) if remaining > 0 else None


async def window_gate_forget(*, store: StateStore, provider: str, connection_id: int) -> None:
    """An operator cleared the connection: forget its gate record (the provider's stays)."""
    await store.delete(_key(provider, connection_id))
