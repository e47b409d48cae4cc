"""The management API's resources, mounted at ``/api/`` by ``omniroute.urls``."""

from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from routing.api import views
from routing.api.affinity import SessionAffinityPinViewSet
from routing.api.config import ConfigApi
from routing.api.flags import FeatureFlagViewSet

router = DefaultRouter()
router.include_root_view = False  # /api/ itself lists every area: omniroute.views
router.register("providers", views.ProviderViewSet, basename="provider")
router.register("connections", views.ProviderConnectionViewSet, basename="connection")
router.register("keys", views.ClientApiKeyViewSet, basename="key")
router.register("combos", views.ComboViewSet, basename="combo")
router.register("model-catalog", views.ModelCatalogEntryViewSet, basename="model-catalog")

# What the admin does beyond the configuration above: the session-affinity pins and the
# feature flags (docs/operating.md, "The management API").
router.register("affinity-pins", SessionAffinityPinViewSet, basename="affinity-pin")
router.register("feature-flags", FeatureFlagViewSet, basename="feature-flag")

urlpatterns = [
    path("", include("leases.urls")),  # the lease API: leases owns it, mounted here as before
    *router.urls,
]

# --- configuration as code: the whole configuration as one document --------------------------
urlpatterns += [
    path("config", ConfigApi.as_view(), name="config"),
]
