"""The one write path for the settings document (every app's sections, one row)."""

from __future__ import annotations

import os
from typing import Any

from django.db import transaction

from omniroute.core.config_version import config_changed
from omniroute.core.settings import SETTINGS, ResolvedSettings, merge
from resilience.models import ResilienceSettings as ResilienceSettingsRow
from resilience.selectors.settings import SETTINGS_PK, settings_resolved_current


def resilience_settings_get() -> ResolvedSettings:
    """The current resolved settings, every section (a sync database read)."""
    return settings_resolved_current()


def resilience_settings_document() -> dict[str, Any]:
    """The current settings as the full camelCase document (what the API returns)."""
    return SETTINGS.render(settings_resolved_current())


@transaction.atomic
def resilience_settings_update(*, patch: Any) -> ResolvedSettings:
    """Validate ``patch`` strictly, merge it into the stored document and save it.

    Raises ``SettingsError`` (nothing saved) naming every bad field. The configuration version
    moves once the transaction commits, so the routing snapshot is rebuilt.
    """
    row, _ = ResilienceSettingsRow.objects.select_for_update().get_or_create(pk=SETTINGS_PK)
    stored = row.document if isinstance(row.document, dict) else {}
    current = SETTINGS.render(SETTINGS.resolve(stored, os.environ))
    row.document = merge(stored, SETTINGS.validate_patch(patch, current))
    row.save(update_fields=["document", "updated_at"])
    transaction.on_commit(config_changed)
    return SETTINGS.resolve(row.document, os.environ)
