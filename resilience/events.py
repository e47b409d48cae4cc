"""Resilience events as they happen: breaker transitions, cooldowns, terminal states, model
locks. The services that log one line per event also hand it to the listeners registered here.

Resilience imports nothing above it, so whoever wants the events (the operator dashboard)
registers a listener when its app is ready. A listener runs inline on the caller's event loop
and must not block or raise: it may only queue the event for its own delivery. A listener that
raises anyway is logged and skipped, never the caller's failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ResilienceEvent", "emit", "listen", "unlisten"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ResilienceEvent:
    """``kind``: breaker, cooldown, terminal or model_lock; ``subject``: what it happened to
    (a breaker's name, ``connection 12``, ``provider/connection 12/model``)."""

    kind: str
    subject: str
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)


Listener = Callable[[ResilienceEvent], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Register ``listener`` (once: registering it again changes nothing)."""
    if listener not in _listeners:
        _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def emit(event: ResilienceEvent) -> None:
    """Hand ``event`` to every listener."""
    for listener in tuple(_listeners):
        try:
            listener(event)
        except Exception:
            logger.exception("a resilience event listener failed on %s", event.kind)
