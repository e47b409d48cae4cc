"""Resilience routes of the management API (included under ``/api/``)."""

from __future__ import annotations

from django.urls import path

from resilience.api.health import BreakerResetApi, HealthApi
from resilience.api.lockouts import ModelCooldownsApi
from resilience.api.settings import ResilienceSettingsApi

urlpatterns = [
    path("resilience", ResilienceSettingsApi.as_view(), name="resilience-settings"),
    path("resilience/reset", BreakerResetApi.as_view(), name="resilience-reset"),
    path("resilience/model-cooldowns", ModelCooldownsApi.as_view(), name="model-cooldowns"),
    path("monitoring/health", HealthApi.as_view(), name="monitoring-health"),
]
