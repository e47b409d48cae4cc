"""Data and helpers of the provider-breaker consumer tests (fixtures are in conftest)."""

from __future__ import annotations

from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.harness import PAST_CONNECTION_DEDUP_SECONDS, Gateway, add_connection

THRESHOLD = 3
RESET_SECONDS = 30
DEGRADE_AT = 2
BREAKER = {"failureThreshold": THRESHOLD, "degradationThreshold": DEGRADE_AT}
BREAKER_SETTINGS = {
    "providerBreaker": {"apikey": {**BREAKER, "resetTimeoutMs": RESET_SECONDS * 1000}},
    # One upstream call per request: the retry of a lone transient failure is tested elsewhere.
    "attempts": {"retriesPerTarget": 0},
}
# Failures are de-duplicated for 5 s per (provider, connection) (``Gateway.fail`` waits
# PAST_CONNECTION_DEDUP_SECONDS between them), network ones 10 s per provider.
PAST_NETWORK_DEDUP_SECONDS = 11.0
MODEL = "m1"
OTHER_MODEL = "m2"
A_MODEL = f"acme/{MODEL}"
A_SECRET = "sk-acme-PRIMARY-0001"
A_BACKUP_SECRET = "sk-acme-BACKUP-0002"
B_SECRET = "sk-bravo-ONLY-0003"


def add_uncooled(provider: Provider, name: str, secret: str, priority: int) -> int:
    # disable_cooling: these tests watch the provider breaker alone, without the per-connection
    # cooldowns that would otherwise skip a connection that just failed (tested elsewhere).
    return add_connection(provider, name, secret, priority=priority, disable_cooling=True)


def add_combo(name: str, *steps: tuple[Provider, int | None]) -> None:
    """A priority combo over ``MODEL`` at each (provider, pinned connection or None)."""
    targets = [{"provider": p, "model": MODEL, "connection_id": c} for p, c in steps]
    combo_save(combo=Combo(), fields={"name": name}, targets=targets)


async def trip(
    gateway: Gateway, provider: str = "acme", gap: float = PAST_CONNECTION_DEDUP_SECONDS
) -> None:
    """Open ``provider``'s breaker with 5xx from two pairs (models m1 and m2 in turn).

    A 5xx is pinned to its (connection, model) pair until another pair of the provider fails
    within the window: the first failure is not counted, each later one is, so
    THRESHOLD + 1 requests open the breaker.
    """
    for attempt in range(THRESHOLD + 1):
        if attempt:
            gateway.clock.advance(gap)
        model = MODEL if attempt % 2 == 0 else OTHER_MODEL
        assert (await gateway.call(f"{provider}/{model}")).status >= 400
