"""The one write path for resilience state. Admin, API and commands call these."""

from resilience.services.settings import (
    resilience_settings_document,
    resilience_settings_get,
    resilience_settings_update,
)

__all__ = [
    "resilience_settings_document",
    "resilience_settings_get",
    "resilience_settings_update",
]
