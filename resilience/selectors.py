"""Reads of resilience configuration (sync ORM; call through ``database_sync_to_async``)."""

from __future__ import annotations

import os
from typing import Any

from resilience.domain.settings import ResilienceSettings, resolve_settings
from resilience.models import ResilienceSettings as ResilienceSettingsRow

SETTINGS_PK = 1


def resilience_settings_stored() -> dict[str, Any]:
    """The stored settings document as the operator left it (``{}`` before the first save)."""
    document = (
        ResilienceSettingsRow.objects.filter(pk=SETTINGS_PK)
        .values_list("document", flat=True)
        .first()
    )
    return document if isinstance(document, dict) else {}


def resilience_settings_current() -> ResilienceSettings:
    """The resolved settings: the stored document over defaults and environment overrides."""
    return resolve_settings(resilience_settings_stored(), os.environ)
