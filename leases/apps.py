from __future__ import annotations

from django.apps import AppConfig


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = "Leases"
    default_auto_field = "django.db.models.BigAutoField"
