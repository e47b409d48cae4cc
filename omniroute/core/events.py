"""Resilience events as they happen: breaker transitions, cooldowns, terminal states, model
locks. The services that log one line per event also hand it to the listeners registered here.

Resilience imports nothing above it, so whoever wants the events (the operator dashboard)
registers a listener when its app is ready. A listener runs inline on the caller's event loop
and must not block or raise: it may only queue the event for its own delivery. A listener that
raises anyway is logged and skipped, never the caller's failure.

An event emitted while a request is being served (the proxy calls ``during_request`` when it
starts one) names that request: the ``X-OmniRoute-Request-Id`` its client got and its request
log entry is found by (docs/operating.md, "Request log").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

__all__ = ["ResilienceEvent", "apart_from_requests", "during_request", "emit", "listen", "unlisten"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ResilienceEvent:
    """``kind``: breaker, cooldown, terminal or model_lock; ``subject``: what it happened to
    (a breaker's name, ``connection 12``, ``provider/connection 12/model``); ``request_id``:
    the request whose attempt caused it (``""``: none, e.g. an operator's reset)."""

    kind: str
    subject: str
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""


Listener = Callable[[ResilienceEvent], None]
_listeners: list[Listener] = []
# The request being served in this context: its task and the tasks it starts (each asyncio
# task runs in a copy of the context it was created in, so requests never see each other's).
_request_id: ContextVar[str] = ContextVar("omniroute_request_id", default="")


def during_request(request_id: str) -> None:
    """The events emitted from now on in this context were caused by request ``request_id``."""
    _request_id.set(request_id)


def listen(listener: Listener) -> None:
    """Register ``listener`` (once: registering it again changes nothing)."""
    if listener not in _listeners:
        _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


async def apart_from_requests(work: Awaitable[T]) -> T:
    """``work``, as a background task of its own, naming no request in its events: a chore
    that a request happened to start (a sweep, a re-check) is not that request's doing."""
    _request_id.set("")  # in this task's own copy of the context
    return await work


def emit(event: ResilienceEvent) -> None:
    """Hand ``event`` to every listener, named after the request being served if any."""
    request_id = _request_id.get()
    if request_id and not event.request_id:
        event = replace(event, request_id=request_id)
    for listener in tuple(_listeners):
        try:
            listener(event)
        except Exception:
            logger.exception("a resilience event listener failed on %s", event.kind)
