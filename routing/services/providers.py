"""Provider writes."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from routing.models import Provider
from routing.services._changes import announce_change


@transaction.atomic
def provider_save(*, provider: Provider, fields: dict[str, Any] | None = None) -> Provider:
    """Create or update a provider (``fields`` applied first), validated."""
    for name, value in (fields or {}).items():
        setattr(provider, name, value)
    provider.full_clean()
    provider.save()
    announce_change()
    return provider


@transaction.atomic
def provider_delete(*, provider: Provider) -> None:
    """Delete a provider; refused (ProtectedError) while connections or combos use it."""
    provider.delete()
    announce_change()
