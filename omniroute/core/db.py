"""Channels' ``database_sync_to_async``, minus one hazard: it never closes a connection that is
inside a transaction.

Channels closes "old" connections around every call. When a sync caller (a DRF view, an admin
action, a test) runs async code with ``async_to_sync`` and that code queries through the bridge,
the query runs back on the caller's thread, with the caller's connection; with
``CONN_MAX_AGE = 0`` or autocommit off that connection counts as old, and closing it would end
the caller's open transaction. Outside a transaction this behaves exactly like Channels'.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import SyncToAsync
from django.db import close_old_connections, connections


def _close_old_connections_outside_transactions() -> None:
    if any(conn.in_atomic_block for conn in connections.all(initialized_only=True)):
        return
    close_old_connections()


class DatabaseSyncToAsync(SyncToAsync):
    """``sync_to_async`` for ORM work, closing stale connections like Channels does."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        _close_old_connections_outside_transactions()
        try:
            return super().thread_handler(loop, *args, **kwargs)
        finally:
            _close_old_connections_outside_transactions()


db_sync_to_async = DatabaseSyncToAsync
