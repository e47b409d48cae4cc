"""Fixtures of the Messages consumer tests."""

from __future__ import annotations

import pytest

from omniroute.core.store import MemoryStore
from routing.domain.client.endpoints import MESSAGES
from routing.models import Provider
from tests.routing.format_support import (
    CLAUDE_BACKUP,
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
    """The Messages endpoint over a fake upstream (no behaviours yet), with a client key."""
    return relay_for(MESSAGES, clock, store)


@pytest.fixture
def claude(db: None) -> Provider:
    """An API-key provider speaking Anthropic's wire format, at ``http://claude.test/v1``."""
    return add_anthropic_provider()


@pytest.fixture
def first(claude: Provider) -> int:
    """``claude``'s first connection (priority 10), key ``CLAUDE_PRIMARY``."""
    return add_connection(claude, "primary", CLAUDE_PRIMARY, priority=10)


@pytest.fixture
def pair(claude: Provider, first: int) -> tuple[int, int]:
    """``claude``'s two connections, tried in this order."""
    return first, add_connection(claude, "backup", CLAUDE_BACKUP, priority=20)
