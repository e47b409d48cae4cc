"""Model catalog writes."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from routing.models import ModelCatalogEntry
from routing.services._changes import announce_change


@transaction.atomic
def catalog_entry_save(
    *, entry: ModelCatalogEntry, fields: dict[str, Any] | None = None
) -> ModelCatalogEntry:
    """Create or update a catalog entry (``fields`` applied first), validated: one entry per
    provider and model, time limits and prices within their bounds."""
    for name, value in (fields or {}).items():
        setattr(entry, name, value)
    entry.full_clean()
    entry.save()
    announce_change()
    return entry


@transaction.atomic
def catalog_entry_delete(*, entry: ModelCatalogEntry) -> None:
    """Delete a catalog entry; its model falls back to the global settings and 'unknown'."""
    entry.delete()
    announce_change()
