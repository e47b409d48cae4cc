"""The one write path for the resilience settings document."""

from __future__ import annotations

import os
from typing import Any

from django.db import transaction

from resilience.domain.settings import (
    ResilienceSettings,
    merge,
    resolve_settings,
    to_document,
    validate_patch,
)
from resilience.models import ResilienceSettings as ResilienceSettingsRow
from resilience.selectors import SETTINGS_PK, resilience_settings_current
from resilience.services.config_version import config_changed


def resilience_settings_get() -> ResilienceSettings:
    """The current resolved settings (a sync database read)."""
    return resilience_settings_current()


def resilience_settings_document() -> dict[str, Any]:
    """The current settings as the full camelCase document (what the API returns)."""
    return to_document(resilience_settings_current())


@transaction.atomic
def resilience_settings_update(*, patch: Any) -> ResilienceSettings:
    """Validate ``patch`` strictly, merge it into the stored document and save it.

    Raises ``SettingsError`` (nothing saved) naming every bad field. The configuration version
    moves once the transaction commits, so the routing snapshot is rebuilt.
    """
    row, _ = ResilienceSettingsRow.objects.select_for_update().get_or_create(pk=SETTINGS_PK)
    stored = row.document if isinstance(row.document, dict) else {}
    current = to_document(resolve_settings(stored, os.environ))
    row.document = merge(stored, validate_patch(patch, current))
    row.save(update_fields=["document", "updated_at"])
    transaction.on_commit(config_changed)
    return resolve_settings(row.document, os.environ)
