"""One log line for each resilience event an operator must see: a breaker transition, a
connection cooldown, a terminal state and a model lock (and none for what changes nothing).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest

from omniroute.core.store import MemoryStore, StateStore
from resilience.domain.classify.classification import Classification
from resilience.domain.connection_state import ConnectionState, FailureFacts
from resilience.domain.lockout import LockoutSettings, LockRequest, LockScope
from resilience.services.breakers import breaker_reset
from resilience.services.connections import connection_mark_failed
from resilience.services.lockouts import lockout_record_failure
from tests.resilience.breaker_services_support import APIKEY, PROVIDER, fail
from tests.resilience.conftest import FakeClock, WriteLog

EVENTS = "omniroute.resilience"


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == EVENTS]


@pytest.fixture
def events(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=EVENTS)
    return caplog


async def test_a_breaker_opening_logs_one_line(
    state_store: StateStore, write_log: WriteLog, events: pytest.LogCaptureFixture
) -> None:
    await fail(state_store, APIKEY.failure_threshold + 3)  # the extra failures change nothing

    assert lines(events) == [
        f"breaker {PROVIDER}: closed -> degraded (failures={APIKEY.degradation_threshold})",
        f"breaker {PROVIDER}: degraded -> open (failures={APIKEY.failure_threshold})",
    ]
    opening = [r for r in events.records if r.name == EVENTS][-1]
    assert opening.levelno == logging.WARNING


async def test_a_reset_logs_its_transition_once(
    state_store: StateStore, write_log: WriteLog, events: pytest.LogCaptureFixture
) -> None:
    await fail(state_store, APIKEY.failure_threshold)
    events.clear()

    await breaker_reset(store=state_store, name=PROVIDER)
    await breaker_reset(store=state_store, name=PROVIDER)

    assert lines(events) == [f"breaker {PROVIDER}: open -> closed (failures=0)"]


def classified(*, cooldown_ms: int, permanent: bool = False) -> Classification:
    return Classification(
        fallback=True,
        cooldown_ms=cooldown_ms,
        new_backoff_level=1,
        reason="server_error",
        permanent=permanent,
    )


async def mark(store: StateStore, classification: Classification, status: int) -> None:
    await connection_mark_failed(
        store=store,
        connection_id=7,
        durable=ConnectionState(),
        classify=lambda level: classification,
        facts=FailureFacts(status=status, text="upstream said no", error_type="x"),
    )


@pytest.mark.parametrize(
    ("classification", "status", "expected"),
    [
        (classified(cooldown_ms=5000), 503, "connection 7: cooling down for 5000 ms"),
        (classified(cooldown_ms=0, permanent=True), 403, "connection 7: terminal state banned"),
    ],
)
async def test_a_cooldown_or_a_terminal_state_logs_one_line(
    fake_clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    events: pytest.LogCaptureFixture,
    classification: Classification,
    status: int,
    expected: str,
) -> None:
    monkeypatch.setattr("resilience.services.connections.persist_connection_state", _written)
    await mark(MemoryStore(clock=fake_clock), classification, status)

    [line] = lines(events)
    assert line.startswith(expected) and "upstream said no" not in line


def _written(*args: object) -> asyncio.Future[None]:
    """The write-through, as if already written."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


async def test_a_model_lock_logs_one_line(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch, events: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("resilience.services.lockouts.persist_lock_record", _written)
    store = MemoryStore(clock=fake_clock)

    await lockout_record_failure(
        store=store,
        provider="openai",
        connection_id=7,
        model="gpt-4o",
        scope=LockScope.EXACT,
        request=LockRequest("rate_limit", 60_000, True),
        settings=LockoutSettings(),
        tz=dt.UTC,
    )

    assert lines(events) == [
        "model gpt-4o locked on openai connection 7 for 60.0 s"
        " (scope=exact, reason=rate_limit, failures=1)"
    ]
