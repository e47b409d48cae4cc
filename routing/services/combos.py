"""Combo writes: the combo and its ordered targets are saved together."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from routing.models import Combo, ComboTarget
from routing.services._changes import announce_change


@transaction.atomic
def combo_save(
    *,
    combo: Combo,
    fields: dict[str, Any] | None = None,
    targets: Iterable[dict[str, Any]] | None = None,
) -> Combo:
    """Create or update a combo; ``targets`` (dicts of ComboTarget fields) replace the old ones."""
    for name, value in (fields or {}).items():
        setattr(combo, name, value)
    combo.full_clean()
    combo.save()
    if targets is not None:
        combo.targets.all().delete()
        for position, data in enumerate(targets):
            target = ComboTarget(combo=combo, position=position, **data)
            target.full_clean()
            target.save()
    announce_change()
    return combo


@transaction.atomic
def combo_delete(*, combo: Combo) -> None:
    """Delete a combo and its targets."""
    combo.delete()
    announce_change()
