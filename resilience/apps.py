from __future__ import annotations

from django.apps import AppConfig


class ResilienceConfig(AppConfig):
    name = "resilience"
    verbose_name = "Resilience"
    default_auto_field = "django.db.models.BigAutoField"
