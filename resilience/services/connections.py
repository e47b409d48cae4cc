"""Connection cooldown and terminal state in the state store, written through to the row.

The store record ``conn:<id>`` is authoritative while the process lives; without one, the
state the configuration snapshot read from the database applies (so a restart keeps a cooling
or terminal connection as it was). Marking runs inside one atomic store update: concurrent
failures of one connection, in one process or many, are serialised and raise its backoff
level once (the anti-thundering-herd guard sees the first one's cooldown).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from omniroute.core.events import ResilienceEvent, emit
from omniroute.core.store import NOT_READ, Json, NotRead, StateStore
from resilience.domain.classify.classifier import Classification
from resilience.domain.connection_state import (
    ConnectionState,
    FailureFacts,
    Marked,
    after_failure,
    cooled_by_provider_rule,
)
from resilience.persistence import persist_connection_state

CONNECTION_PREFIX = "conn:"
logger = logging.getLogger("omniroute.resilience")


def connection_key(connection_id: int) -> str:
    return f"{CONNECTION_PREFIX}{connection_id}"


def _decode(raw: Json | None) -> ConnectionState | None:
    return ConnectionState.from_dict(raw) if isinstance(raw, dict) else None


async def connection_state_get(
    *,
    store: StateStore,
    connection_id: int,
    durable: ConnectionState,
    raw: Json | NotRead = NOT_READ,
) -> ConnectionState:
    """The live state: the store's record, else what the database said (``durable``);
    ``raw``: the record as the caller read it already (``connection_key``)."""
    if raw is NOT_READ:
        raw = await store.get(connection_key(connection_id))
    return _decode(raw) or durable


async def connection_states_recorded(*, store: StateStore) -> dict[int, ConnectionState]:
    """Every connection state the store holds a record of, by connection id: one scan. A
    connection without a record is as its row says (``connection_state_get``)."""
    found: dict[int, ConnectionState] = {}
    for key, raw in (await store.scan(CONNECTION_PREFIX)).items():
        suffix = key[len(CONNECTION_PREFIX) :]
        state = _decode(raw)
        if suffix.isdigit() and state is not None:
            found[int(suffix)] = state
    return found


@dataclass(slots=True)
class _Seen:
    marked: Marked | None = None


async def connection_mark_failed(
    *,
    store: StateStore,
    connection_id: int,
    durable: ConnectionState,
    classify: Callable[[int], Classification],
    facts: FailureFacts,
    credits_signal: bool = False,
) -> Marked:
    """Record one failure: classify at the current backoff level and mark atomically."""
    now = store.clock()
    seen = _Seen()

    def updater(raw: Json | None) -> Json | None:
        state = _decode(raw) or durable
        seen.marked = after_failure(
            state, classify(state.backoff_level), facts, now=now, credits_signal=credits_signal
        )
        return seen.marked.state.to_dict() if seen.marked.changed else raw

    await store.update(connection_key(connection_id), updater)
    assert seen.marked is not None
    if seen.marked.changed:
        _log_marked(connection_id, seen.marked)
        written = persist_connection_state(connection_id, seen.marked.state)
        if _durable(seen.marked):  # written before the answer that caused it
            await written
    return seen.marked


async def connection_record_short_hint(
    *, store: StateStore, connection_id: int, durable: ConnectionState, hint_ms: int
) -> bool:
    """Remember a short upstream hint on the connection; whether it is the second in a row
    (evidence of a real limit: the caller then cools the connection for everyone). After such
    evidence the remembered end covers the cooldown and one more hint, so that the refusal of
    the first request after the cooldown counts as evidence too (a limit still in force)."""
    now = store.clock()
    evidence = False

    def updater(raw: Json | None) -> Json | None:
        nonlocal evidence
        state = _decode(raw) or durable
        evidence = state.hinted_evidence(now)
        span = (2 if evidence else 1) * hint_ms / 1000
        return replace(state, hinted_until=now + span).to_dict()

    await store.update(connection_key(connection_id), updater)
    return evidence


def _log_marked(connection_id: int, marked: Marked) -> None:
    """One line for a connection that became terminal or started (or extended) a cooldown."""
    reason = marked.classification.reason if marked.classification is not None else "-"
    subject = f"connection {connection_id}"
    if marked.terminal is not None:
        logger.warning(
            "connection %d: terminal state %s (reason=%s)", connection_id, marked.terminal, reason
        )
        detail = {"connection_id": connection_id, "state": marked.terminal, "reason": reason}
        emit(ResilienceEvent("terminal", subject, str(marked.terminal), detail))
    elif marked.cooldown_ms > 0:
        logger.info(
            "connection %d: cooling down for %d ms (reason=%s, backoff_level=%d)",
            connection_id,
            marked.cooldown_ms,
            reason,
            marked.state.backoff_level,
        )
        detail = {
            "connection_id": connection_id,
            "cooldown_ms": marked.cooldown_ms,
            "reason": reason,
        }
        emit(ResilienceEvent("cooldown", subject, f"{marked.cooldown_ms} ms", detail))


def _durable(marked: Marked) -> bool:
    """Terminal states and upstream-hinted cooldowns must survive a crash right after."""
    hinted = marked.classification is not None and marked.classification.used_upstream_hint
    return marked.terminal is not None or (hinted and marked.cooldown_ms > 0)


async def connection_mark_succeeded(
    *,
    store: StateStore,
    connection_id: int,
    durable: ConnectionState,
    seen: ConnectionState | None = None,
) -> bool:
    """A success clears the error fields, once: no write when already clean. True if cleared.

    A terminal state is left alone: a request that started before the ban may still succeed,
    and only new credentials or an operator lift a terminal state. ``seen`` is the state
    read when the connection was selected: when it was clean, nothing is read again (clearing
    decides from that snapshot too).
    """
    current = seen or await connection_state_get(
        store=store, connection_id=connection_id, durable=durable
    )
    if current.is_clean or current.is_terminal:
        return False
    cleared = False

    def updater(raw: Json | None) -> Json | None:
        nonlocal cleared
        state = _decode(raw) or durable
        cleared = not (state.is_clean or state.is_terminal)
        return ConnectionState().to_dict() if cleared else raw

    await store.update(connection_key(connection_id), updater)
    if cleared:
        persist_connection_state(connection_id, ConnectionState())
    return cleared


async def connection_cool_siblings(
    *, store: StateStore, durable: dict[int, ConnectionState], cooldown_ms: int
) -> list[int]:
    """An operator rule of scope ``provider``: cool every non-terminal connection given."""
    now = store.clock()
    cooled = []
    for connection_id, state in durable.items():

        def updater(raw: Json | None, state: ConnectionState = state) -> Json | None:
            current = _decode(raw) or state
            return cooled_by_provider_rule(current, cooldown_ms, now).to_dict()

        after = _decode(await store.update(connection_key(connection_id), updater))
        if after is not None and after.remaining(now) > 0:
            persist_connection_state(connection_id, after)
            cooled.append(connection_id)
    if cooled:
        logger.info(
            "connections %s: cooling down for %d ms (an operator rule of scope provider)",
            ",".join(map(str, cooled)),
            cooldown_ms,
        )
    return cooled


async def connection_state_reset(*, store: StateStore, connection_id: int) -> None:
    """Operator reset: forget the live state (the caller clears the row)."""
    await store.delete(connection_key(connection_id))
