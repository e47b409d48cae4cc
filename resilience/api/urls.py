"""Resilience routes of the management API (included under ``/api/``)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from resilience.api.breakers import CircuitBreakerViewSet
from resilience.api.health import BreakerResetApi, HealthApi
from resilience.api.lockouts import ModelCooldownsApi
from resilience.api.rules import ProviderErrorRuleViewSet, StatusRestatementRuleViewSet
from resilience.api.settings import ResilienceSettingsApi

router = DefaultRouter()
router.include_root_view = False  # /api/ itself lists every area: omniroute.views
router.register("error-rules", ProviderErrorRuleViewSet, basename="error-rule")
router.register("restatement-rules", StatusRestatementRuleViewSet, basename="restatement-rule")
router.register("breakers", CircuitBreakerViewSet, basename="breaker")

urlpatterns = [
    path("resilience", ResilienceSettingsApi.as_view(), name="resilience-settings"),
    path("resilience/reset", BreakerResetApi.as_view(), name="resilience-reset"),
    path("resilience/model-cooldowns", ModelCooldownsApi.as_view(), name="model-cooldowns"),
    path("monitoring/health", HealthApi.as_view(), name="monitoring-health"),
    *router.urls,
]
