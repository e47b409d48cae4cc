"""Reads of the settings document (sync ORM; call through ``database_sync_to_async``).

The document holds every app's sections; it is resolved through the registry
(``omniroute.core.settings.SETTINGS``), so resilience reads the sections routing declares
without importing routing.
"""

from __future__ import annotations

import os
from typing import Any

from omniroute.core.settings import SETTINGS, ResolvedSettings
from resilience.domain.settings.document import ResilienceSettings, resilience_settings_of
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


def settings_resolved_current() -> ResolvedSettings:
    """Every registered section resolved: the stored document over defaults and environment
    overrides."""
    return SETTINGS.resolve(resilience_settings_stored(), os.environ)


def resilience_settings_current() -> ResilienceSettings:
    """Resilience's own resolved sections."""
    return resilience_settings_of(settings_resolved_current())
