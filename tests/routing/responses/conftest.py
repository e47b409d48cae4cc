"""Fixtures of the Responses consumer tests."""

from __future__ import annotations

import pytest

from omniroute.core.store import MemoryStore
from routing.domain.client.endpoints import RESPONSES
from tests.routing.format_support import (
    CLAUDE_PRIMARY,
    Relay,
    add_anthropic_provider,
    relay_for,
)
from tests.routing.harness import (
    FakeClock,
    add_connection,
)


@pytest.fixture
def relay(
    fresh_snapshot: None, clock: FakeClock, store: MemoryStore, db: None, policy_clock: FakeClock
) -> Relay:
    """The Responses endpoint over a fake upstream (no behaviours yet), with a client key."""
    return relay_for(RESPONSES, clock, store)


@pytest.fixture
def claude(db: None) -> int:
    """An Anthropic-format provider's connection: a model no Responses request can use."""
    return add_connection(add_anthropic_provider(), "primary", CLAUDE_PRIMARY, priority=10)
