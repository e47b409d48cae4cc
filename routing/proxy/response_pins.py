"""Responses continued by ``previous_response_id`` go to the connection that produced them:
another account cannot see that response.

When a Responses answer succeeds, its id is remembered against the answering connection in the
state store for :data:`PIN_TTL_SECONDS`; a later request naming it as ``previous_response_id``
is planned on that connection's targets only. An id the gateway does not know (expired, or
produced elsewhere) leaves the plan as it is: the upstream says whether it knows it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import orjson

from omniroute.core.store import StateStore
from routing.domain.plan.planning import RoutePlan

logger = logging.getLogger(__name__)

PIN_TTL_SECONDS = 30 * 24 * 3600.0  # as long as an upstream keeps a stored response
_PREFIX = "response-pin:"


async def remember(store: StateStore, response_id: str, connection_id: int) -> None:
    await store.set(_PREFIX + response_id, connection_id, ttl=PIN_TTL_SECONDS)


async def pinned_plan(store: StateStore, plan: RoutePlan, response_id: str) -> RoutePlan:
    """``plan`` narrowed to the connection that produced ``response_id``, when it is known and
    in the plan."""
    connection = await store.get(_PREFIX + response_id)
    if not isinstance(connection, int):
        return plan
    targets = tuple(t for t in plan.targets if t.connection.id == connection)
    if not targets:
        logger.info("response %s is from connection %s, not in the plan", response_id, connection)
        return plan
    return replace(plan, targets=targets)


def response_id(body: bytes) -> str | None:
    """The ``id`` of a Responses answer body."""
    try:
        parsed: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return answer_id(parsed)


def answer_id(answer: Any) -> str | None:
    """The ``id`` of a Responses answer, parsed."""
    found = answer.get("id") if isinstance(answer, dict) else None
    return found if isinstance(found, str) else None
