"""Probe claims of pairs whose lock has ended: the first request to
find such a pair claims its one probe in the state store; the others keep skipping it (a
self-set lock) or poll it (an upstream-hinted lock) until the probe has answered. A claim is
keyed by the lock's generation, so each lock has its own probe, and it expires on its own."""

from __future__ import annotations

from omniroute.core.store import StateStore

PROBE_PREFIX = "pair-probe:"


async def pair_probe_claim(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    generation: float,
    ttl: float,
) -> str | None:
    """Claim the one probe of a pair whose self-set lock just ended; each lock
    (``generation``) has its own probe. The claim's key when this caller got it (to release
    it if the probe ends with no answer), else ``None``."""
    key = f"{PROBE_PREFIX}{provider}:{connection_id}:{model}:{generation!r}"
    return await _claim(store, key, ttl)


async def pair_hinted_probe_claim(
    *,
    store: StateStore,
    provider: str,
    connection_id: int,
    model: str,
    generation: float,
    ttl: float,
) -> str | None:
    """Claim the one probe of a pair whose hinted lock (started at ``generation``) has ended;
    the claim's key when this caller got it (to release it if the probe ends with no answer),
    else ``None``."""
    key = f"{PROBE_PREFIX}hinted:{provider}:{connection_id}:{model}:{generation!r}"
    return await _claim(store, key, ttl)


async def _claim(store: StateStore, key: str, ttl: float) -> str | None:
    """``key`` when this caller is the first to take it (within ``ttl``), else ``None``."""
    return key if await store.incr(key, ttl=ttl) == 1 else None


async def pair_probe_release(*, store: StateStore, key: str) -> None:
    """Give a claimed probe back (it ended with no answer: the client left, the deadline ran
    out): the next waiting request may probe at once."""
    await store.delete(key)
