"""ASGI routing by exact path, ahead of Channels' ``URLRouter``.

The /v1 client APIs are fixed paths, asked on every proxied request. Channels' router tries each
route's Django pattern in turn and copies the scope to add ``path_remaining`` and ``url_route``,
which no relay consumer reads; a dictionary finds the same application at once
(docs/architecture.md, "One request"). Any other path, a scope with a ``root_path``, or one the
router already began goes to the router as before, so routing by pattern (``/v1/models/{model}``,
the catch-alls) is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Application = Any  # an ASGI application


class ExactPaths:
    """Routes a scope whose ``path`` is one of ``routes`` straight to its application."""

    def __init__(self, routes: Mapping[str, Application], fallback: Application) -> None:
        self.routes = dict(routes)
        self.fallback = fallback

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        application = self.routes.get(scope["path"])
        if application is None or scope.get("root_path") or "path_remaining" in scope:
            application = self.fallback
        return await application(scope, receive, send)
