"""Feature flag writes: each takes effect at the next request, without a restart."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from routing.models import FeatureFlag
from routing.services._changes import announce_change


@transaction.atomic
def feature_flag_save(*, flag: FeatureFlag, fields: dict[str, Any] | None = None) -> FeatureFlag:
    """Create or update a flag (``fields`` applied first), validated."""
    for name, value in (fields or {}).items():
        setattr(flag, name, value)
    flag.full_clean()
    flag.save()
    announce_change()
    return flag


@transaction.atomic
def feature_flag_delete(*, flag: FeatureFlag) -> None:
    """Delete a flag: the environment's setting applies again."""
    flag.delete()
    announce_change()
