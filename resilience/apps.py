from __future__ import annotations

from django.apps import AppConfig

import resilience.domain.settings.document  # noqa: F401  registers resilience's settings sections


class ResilienceConfig(AppConfig):
    name = "resilience"
    verbose_name = "Resilience"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Push the state-store gauges to the metrics registry (read at every scrape)."""
        from omniroute.core.observability.metrics import register_state
        from resilience.metrics import ResilienceCollector

        register_state("resilience", ResilienceCollector())
