"""The lease tests that drive routing's management API or its proxy use routing's fixtures."""

from __future__ import annotations

from tests.routing.conftest import (
    acme,
    api_client,
    backup,
    both,
    clock,
    connection,
    fresh_snapshot,
    gateway,
    manage_client,
    manage_key,
    policy_clock,
    primary,
    process_store,
    provider,
    store,
)

__all__ = [
    "acme",
    "api_client",
    "backup",
    "both",
    "clock",
    "connection",
    "fresh_snapshot",
    "gateway",
    "manage_client",
    "manage_key",
    "policy_clock",
    "primary",
    "process_store",
    "provider",
    "store",
]
