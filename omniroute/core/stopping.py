"""The process is stopping: one signal, set by the server's stop before it cancels anything.

Under daphne (``omniroute.shutdown``) and under uvicorn (``omniroute.uvicorn_server``) a stop
by SIGTERM or SIGINT first stops accepting connections, then sets :data:`shutting_down`, then
lets the open requests finish for :data:`SHUTDOWN_GRACE_SECONDS` before it cancels what is
left. The proxy watches the signal: a request that arrives once it is set is refused with a 503
``server_shutting_down``, and a stream still open ends with that in-band error, while a plain
request is left to finish (docs/deploying.md).

The signal is set and watched on the serving event loop's thread; a watcher is a plain
function, called once, when the signal is set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger("omniroute.server")

SHUTDOWN_GRACE_SECONDS = 30  # plain requests finish within 30 s of a stop (docs/deploying.md)
SHUTTING_DOWN = "server_shutting_down"  # the error code of what the stop ends or refuses

Watcher = Callable[[], None]


class ShuttingDown:
    """Whether the process is stopping, and who to tell when it starts to."""

    def __init__(self) -> None:
        self._set = False
        self._watchers: set[Watcher] = set()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """The stop has begun: call every watcher (once; a failing one is logged)."""
        if self._set:
            return
        self._set = True
        watchers, self._watchers = self._watchers, set()
        for watcher in watchers:
            try:
                watcher()
            except Exception:
                logger.exception("a shutdown watcher failed")

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` when the signal is set (at once if it is already); what this
        returns stops watching."""
        if self._set:
            watcher()
            return _nothing
        self._watchers.add(watcher)
        return lambda: self._watchers.discard(watcher)


def _nothing() -> None:
    return None


shutting_down = ShuttingDown()  # the process's one signal
