"""The context-relay strategy around one request: the declared
order, plus a handoff between accounts of one conversation.

* Before the attempts: when the session has a prepared summary, every attempt on another
  account than the one it was prepared on carries it (``routing.strategies.handoff``).
* After a success on a provider of ``handoffProviders``: when that account's last quota reading
  (``routing.proxy.guards.quota``) is within ``[handoffThreshold, 0.95)``, a summary of the
  conversation is asked of the same target, in the background, and kept per (combo, session)
  in the state store. A success on another account uses it up.

A request without a stable session id (a session header or body field,
``routing.domain.affinity.session_key``; not the hash of its first text, which two clients may
share)
has no handoff, and summaries are kept per client key. Failures of the background work are
logged, never the client's. The summary call goes straight to the upstream, past the
admission gates: it is one short call per account and session every two minutes at most.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

import orjson

from omniroute.core.store import Json, StateStore
from routing.domain.affinity.session_key import INPUT_KEY_PREFIX, session_key
from routing.domain.client.endpoints import CHAT_COMPLETIONS, MESSAGES
from routing.domain.config.combo_options import DEFAULT_OPTIONS
from routing.domain.config.vocabulary import Strategy, WireFormat
from routing.domain.plan.planning import Target
from routing.domain.quota.snapshots import QuotaSnapshot, quota_key
from routing.proxy.context import AttemptContext
from routing.proxy.seams import answered_target
from routing.proxy.upstream.client import Upstream
from routing.strategies import handoff

logger = logging.getLogger(__name__)

HANDOFF_TTL_SECONDS = 24 * 3600.0
REFRESH_SECONDS = 120.0  # a summary of one account is prepared again after this long
SUMMARY_TIMEOUT_SECONDS = 60.0
_background: set[asyncio.Task[None]] = set()  # kept so that the loop does not drop them
clock = time.time


def handoff_key(combo: str, key_id: int, session: str) -> str:
    """Per combo, client key and session: one client's summary never reaches another's."""
    return f"handoff:{combo}:{key_id}:{session}"


def _settings(context: AttemptContext) -> tuple[tuple[str, ...], float]:
    combo = context.facts.snapshot.combos.get(context.plan.combo or "")
    options = combo.options if combo is not None else DEFAULT_OPTIONS
    return options.handoff_providers, options.handoff_threshold


async def prepare(
    context: AttemptContext,
    store: StateStore,
    upstream: Upstream,
    payload: dict[str, Any],
    headers: Iterable[tuple[bytes, bytes]],
) -> None:
    """Set up the handoff of a context-relay request (nothing for any other)."""
    plan = context.plan
    if plan.combo is None or plan.strategy != Strategy.CONTEXT_RELAY:
        return
    session = session_key(payload, headers)
    if session is None or session.startswith(INPUT_KEY_PREFIX):  # a stable session id only
        return
    key = handoff_key(plan.combo, context.facts.key.id, session)
    record = await store.get(key)
    prepared = record if isinstance(record, dict) else None
    summary = prepared.get("summary") if prepared is not None else None
    if prepared is not None and isinstance(summary, str):
        origin, name = prepared.get("from"), context.facts.endpoint.name

        def rewrite(given: dict[str, Any], target: Target) -> dict[str, Any]:
            if target.connection.id == origin:
                return given
            return handoff.with_handoff(given, summary, name)

        context.rewrite = rewrite
    providers, threshold = _settings(context)

    def finish() -> None:
        answered = answered_target(context)
        if answered is None:
            return
        task = asyncio.ensure_future(
            _after_success(store, upstream, payload, key, prepared, answered, providers, threshold)
        )
        _background.add(task)
        task.add_done_callback(_background.discard)

    context.on_finish.append(finish)


async def _after_success(
    store: StateStore,
    upstream: Upstream,
    payload: dict[str, Any],
    key: str,
    prepared: dict[str, Any] | None,
    target: Target,
    providers: tuple[str, ...],
    threshold: float,
) -> None:
    try:
        if prepared is not None and prepared.get("from") != target.connection.id:
            await store.delete(key)  # used up: the conversation has moved
            prepared = None
        if target.provider.slug not in providers:
            return
        if prepared is not None and clock() - float(prepared.get("at", 0)) < REFRESH_SECONDS:
            return
        snapshot = QuotaSnapshot.from_record(await store.get(quota_key(target.connection.id)))
        used = snapshot.as_of(clock()).percent_used if snapshot is not None else None
        if not handoff.should_prepare(used, threshold):
            return
        summary = await _summarise(upstream, target, payload)
        if summary is not None:
            record: Json = {"from": target.connection.id, "summary": summary, "at": clock()}
            await store.set(key, record, ttl=HANDOFF_TTL_SECONDS)
    except Exception:
        logger.exception("context handoff for %s failed", key)


async def _summarise(upstream: Upstream, target: Target, payload: dict[str, Any]) -> str | None:
    turns = handoff.conversation(payload)
    if not turns:
        return None
    wire = target.provider.wire_format
    endpoint = MESSAGES if wire == WireFormat.ANTHROPIC else CHAT_COMPLETIONS
    body = orjson.dumps(handoff.summary_request(turns, target.model))
    async with asyncio.timeout(SUMMARY_TIMEOUT_SECONDS):
        outcome, reply = await upstream.send(target, body, stream=False, endpoint=endpoint)
    if reply is None:
        logger.warning("context handoff summary failed on %s: %s", target.label, outcome.detail)
        return None
    await reply.aclose()
    return handoff.summary_text(orjson.loads(reply.body), wire)
