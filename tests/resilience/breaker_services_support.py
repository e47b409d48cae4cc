"""Shared helpers of the breaker service tests: the API-key policy and one-call failures."""

from __future__ import annotations

import itertools

from omniroute.core.store import StateStore
from resilience.domain.breaker.machine import Breaker, BreakerPolicy
from resilience.domain.profiles import PROFILES, ProfileName
from resilience.services.breakers import breaker_get, breaker_record_failure

APIKEY = BreakerPolicy.from_profile(PROFILES[ProfileName.APIKEY])  # DEGRADED 7, OPEN 12, 30 s
PROVIDER = "openai"

_connections = itertools.count(1)


async def fail(store: StateStore, times: int = 1, name: str = PROVIDER) -> Breaker | None:
    """``times`` failures, each from a connection of its own (no de-duplication applies)."""
    result = None
    for _ in range(times):
        result = await breaker_record_failure(
            store=store, name=name, policy=APIKEY, connection_id=next(_connections)
        )
    return result


async def stored(store: StateStore, name: str = PROVIDER) -> Breaker:
    """The breaker ``name`` as the store holds it."""
    return await breaker_get(store=store, name=name)
