"""The management API's resources, mounted at ``/api/`` by ``omniroute.urls``."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from routing.api import views
from routing.api.leases import SessionLeaseApi

router = DefaultRouter()
router.include_root_view = False  # /api/ itself lists every area: omniroute.views
router.register("providers", views.ProviderViewSet, basename="provider")
router.register("connections", views.ProviderConnectionViewSet, basename="connection")
router.register("keys", views.ClientApiKeyViewSet, basename="key")
router.register("combos", views.ComboViewSet, basename="combo")
router.register("model-catalog", views.ModelCatalogEntryViewSet, basename="model-catalog")

urlpatterns = [
    path("v1/session-leases", SessionLeaseApi.as_view(), name="session-leases"),
    *router.urls,
]
