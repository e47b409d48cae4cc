"""The request log's API routes, mounted at ``/api/`` by ``omniroute.urls``."""

from __future__ import annotations

from rest_framework.routers import DefaultRouter

from omniroute.core.observability.requestlog.api import RequestLogEntryViewSet

router = DefaultRouter()
router.include_root_view = False  # /api/ itself lists every area: omniroute.views
router.register("requests", RequestLogEntryViewSet, basename="request-log")

urlpatterns = router.urls
