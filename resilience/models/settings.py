"""The operator's resilience settings document, one row."""

from __future__ import annotations

from django.db import models


class ResilienceSettings(models.Model):
    """The settings document, one row (pk=1): every app's sections (see
    ``omniroute.core.settings``)."""

    document = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "resilience_settings"
        verbose_name = "resilience settings"
        verbose_name_plural = "resilience settings"

    def __str__(self) -> str:
        return "Resilience settings"
