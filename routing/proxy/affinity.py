"""Session affinity around one request (docs/routing.md, "Session affinity"): the step after
the strategy step, and what the request's end teaches the pins.

When ``sessionAffinity.ttlMs`` is above 0 and the request names a session
(``routing.domain.affinity.session_key``: a session header, a session field of the body, else a
hash of
its first input text), each provider of the plan gets one connection first: the session's live
pin there, when the plan has it, else the least recently used of the provider's connections
in the plan (``routing.domain.affinity.pins``). It moves to the front of each of that provider's
steps; targets never cross steps, so a combo's declared fail-over order stays. The strategies
whose order is their point (``OWNS_ORDERING``: cache-optimized, quota-share, round-robin,
strict-random, fusion, pipeline, reset-aware, headroom, reset-window, auto) are left alone.

When the request ends:

* a connection of the provider answered → the session is pinned there (slid forward when it
  was already; made, or moved, otherwise): a session whose connection failed or cooled down
  moves to the one that answered instead, and stays there;
* nothing of the provider answered, and the pinned connection was skipped (cooling down,
  locked, breaker open, ...) or failed in a way the gateway fails over on (a 5xx, a 429, a
  timeout) → the pin is deleted, so the next request chooses afresh;
* a hedge started beside a slow attempt answered (``routing.proxy.hedging``), or the pinned
  connection only refused with a short upstream hint that locked nothing for others (the
  request went to an equivalent account for now) → the pin stays as it is: neither is a
  failure of the pinned connection; only a lock on it (or another failure) moves the session;
* otherwise (the client left, the request itself was refused) the pin stays as it is.

Sessions are told apart per client key: one client's session id never steers another's.
With the TTL at 0 (the default) nothing here touches the state store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from omniroute.core.store import StateStore
from resilience.domain.attribution import Effect
from routing.domain.affinity.pins import OWNS_ORDERING, pin_hash, provider_candidates, with_first
from routing.domain.affinity.session_key import session_key
from routing.domain.attempts.outcomes import OutcomeKind, should_fail_over
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext
from routing.services.affinity import (
    affinity_choose,
    affinity_pin_answered,
    affinity_pin_evict,
    affinity_pin_get,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Choice:
    """What affinity decided for one provider of the request."""

    provider: str
    key_hash: str
    pinned: int | None  # the connection of the session's live pin, if it had one


async def keep_session_together(
    context: AttemptContext,
    store: StateStore,
    payload: Mapping[str, Any],
    headers: Iterable[tuple[bytes, bytes]],
) -> None:
    """Put each provider's connection for this session first in ``context.plan`` and settle
    the pins when the request ends (see the module docstring)."""
    settings = context.facts.snapshot.session_affinity
    if not settings.enabled or context.plan.strategy in OWNS_ORDERING:
        return
    session = session_key(payload, headers)
    if session is None:
        return
    ttl, identity = settings.ttl_seconds, f"{context.facts.key.id}:{session}"
    choices = [
        await _choose(context, store, provider, candidates, pin_hash(provider, identity), ttl)
        for provider, candidates in provider_candidates(context.plan.targets).items()
    ]
    context.on_finish.append(lambda: _settle(context, store, choices, ttl))


async def _choose(
    context: AttemptContext,
    store: StateStore,
    provider: str,
    candidates: list[tuple[int, int]],
    key_hash: str,
    ttl: float,
) -> _Choice:
    """Put the session's connection at ``provider`` first: its pin's, when the plan has it,
    else the least recently used."""
    pin = await affinity_pin_get(store=store, provider=provider, key_hash=key_hash, ttl_seconds=ttl)
    planned = pin is not None and any(pin.connection_id == c for c, _ in candidates)
    pinned = pin.connection_id if pin is not None and planned else None
    chosen = await affinity_choose(
        store=store, provider=provider, candidates=candidates, pinned=pinned
    )
    targets = with_first(context.plan.targets, provider, chosen)
    context.plan = replace(context.plan, targets=targets)
    return _Choice(provider, key_hash, pin.connection_id if pin is not None else None)


async def _settle(
    context: AttemptContext, store: StateStore, choices: list[_Choice], ttl: float
) -> None:
    for choice in choices:
        try:
            await _settle_one(context, store, choice, ttl)
        except Exception:  # best effort: the client has its answer already
            logger.exception("session affinity at %s not settled", choice.provider)


async def _settle_one(
    context: AttemptContext, store: StateStore, choice: _Choice, ttl: float
) -> None:
    provider, key_hash = choice.provider, choice.key_hash
    answered = _answered(context, provider)
    if answered is not None and choice.pinned is not None and answered != choice.pinned:
        if _by_hedge(context, answered) or _only_hinted(context, provider, choice.pinned):
            return  # the pinned connection was only slow, or briefly rate-limited: it stays
    if answered is not None:
        await affinity_pin_answered(
            store=store,
            provider=provider,
            key_hash=key_hash,
            connection_id=answered,
            ttl_seconds=ttl,
        )
    elif choice.pinned is not None and _let_down(context, provider, choice.pinned):
        await affinity_pin_evict(
            store=store,
            provider=provider,
            key_hash=key_hash,
            connection_id=choice.pinned,
            ttl_seconds=ttl,
        )


def _answered(context: AttemptContext, provider: str) -> int | None:
    """The connection of ``provider`` that answered the request, if one did."""
    for target, outcome in reversed(context.loop.attempts):
        if outcome.ok and target.provider.slug == provider:
            return target.connection.id
    return None


def _by_hedge(context: AttemptContext, connection: int) -> bool:
    """Whether the answer came from a hedge started beside a slow attempt."""
    hedge = context.loop.hedge
    return (
        hedge is not None
        and hedge.connection.id == connection
        and any(t == hedge and outcome.ok for t, outcome in context.loop.attempts)
    )


def _only_hinted(context: AttemptContext, provider: str, connection: int) -> bool:
    """Whether the connection was tried and only refused with a short upstream hint that
    locked it for no other request."""
    if any(_is(e.target, provider, connection) for e in context.loop.exclusions):
        return False
    refused = [t for t, o in context.loop.attempts if _is(t, provider, connection) and not o.ok]
    for target in refused:
        verdict = context.loop.verdict(target)
        if verdict is None or not verdict.hint_ms or verdict.effect is not Effect.COUNTED:
            return False
    return bool(refused)


def _is(target: Target, provider: str, connection: int) -> bool:
    return target.provider.slug == provider and target.connection.id == connection


def _let_down(context: AttemptContext, provider: str, connection: int) -> bool:
    """Whether the connection was skipped by a timer or a gate, or failed in a way the loop
    fails over on (a local gate's refusal is the gateway's, not the connection's)."""

    def ours(target: Target) -> bool:
        return target.provider.slug == provider and target.connection.id == connection

    if any(ours(e.target) and not e.held_back for e in context.loop.exclusions):
        return True
    for target, outcome in context.loop.attempts:
        if not ours(target) or outcome.ok or outcome.kind is OutcomeKind.LOCAL:
            continue
        verdict = context.loop.verdict(target)
        if verdict.fail_over if verdict is not None else should_fail_over(outcome):
            return True
    return False
