"""Every configuration write ends by telling the snapshot, once the transaction commits."""

from __future__ import annotations

from django.db import transaction

from omniroute.core.config_version import config_changed


def announce_change() -> None:
    """Invalidate routing snapshots after the current transaction commits."""
    transaction.on_commit(config_changed)
