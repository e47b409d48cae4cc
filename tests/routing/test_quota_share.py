"""The quota-share target selection, pure (reference-part2 §3.2): in-flight slots, DRR
deficits per combo, bucket and concurrency gating, P2C (times are plain seconds)."""

from __future__ import annotations

from routing.domain.config import ConnectionInfo, ProviderInfo
from routing.domain.planning import Target
from routing.domain.quota_share import (
    SLOT_TTL_SECONDS,
    QuotaShareState,
    saturation_buckets,
)
from routing.domain.vocabulary import WireFormat

NOW = 1000.0
PROVIDER = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)


def target(connection_id: int, model: str = "m", max_concurrent: int | None = None) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider="alpha",
        name=f"alpha-{connection_id}",
        priority=connection_id,
        base_url="https://alpha.test/v1",
        auth_type="api_key",
        secret=f"secret-{connection_id}",
        max_concurrent=max_concurrent,
    )
    return Target(PROVIDER, connection, model)


# --- in-flight slots ----------------------------------------------------------------------------


def test_slots_count_until_released() -> None:
    state = QuotaShareState()
    first, second = state.acquire(1, NOW), state.acquire(1, NOW)
    state.acquire(2, NOW)
    assert state.in_flight(1, NOW) == 2
    first.release()
    assert state.in_flight(1, NOW) == 1
    assert state.in_flight(2, NOW) == 1
    second.release()
    assert state.in_flight(1, NOW) == 0


def test_release_is_idempotent() -> None:
    state = QuotaShareState()
    slot = state.acquire(1, NOW)
    state.acquire(1, NOW)
    slot.release()
    slot.release()  # must not take the other request's count with it
    assert state.in_flight(1, NOW) == 1


def test_a_slot_never_released_expires_after_the_ttl() -> None:
    state = QuotaShareState()
    slot = state.acquire(1, NOW)
    assert slot.expires_at == NOW + SLOT_TTL_SECONDS
    assert state.in_flight(1, NOW + SLOT_TTL_SECONDS - 0.001) == 1
    assert state.in_flight(1, NOW + SLOT_TTL_SECONDS) == 0
    slot.release()  # late: nothing to take back
    state.acquire(1, NOW + SLOT_TTL_SECONDS)
    assert state.in_flight(1, NOW + SLOT_TTL_SECONDS) == 1


def test_the_slot_ttl_is_configurable() -> None:
    state = QuotaShareState(slot_ttl=5.0)
    state.acquire(1, NOW)
    assert state.in_flight(1, NOW + 4.9) == 1
    assert state.in_flight(1, NOW + 5.0) == 0


def test_saturation_buckets_name_the_bare_model() -> None:
    assert saturation_buckets("openai/gpt-4o") == ("5h", "7d", "7d:gpt-4o")
    assert saturation_buckets("vendor/org/model") == ("5h", "7d", "7d:org/model")
    assert saturation_buckets("gpt-4o") == ("5h", "7d", "7d:gpt-4o")
