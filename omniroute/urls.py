"""Django URLs: the admin and the management API (``/v1`` is routed in ``asgi.py``)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from omniroute.core.admin import bound_stock_admins
from omniroute.dashboard.views import dashboard
from omniroute.metrics import metrics
from omniroute.views import ApiRootView, DocsAccess, api_not_found, no_favicon
from resilience.api.health import ReadinessApi, liveness

admin.site.site_header = "OmniRoute administration"
admin.site.site_title = "OmniRoute"
admin.site.index_title = "Operate the gateway"
# The app list beside every page took a quarter of a 1 280-pixel screen from the change lists;
# the breadcrumbs and the index (with its health line) lead everywhere it did.
admin.site.enable_nav_sidebar = False
bound_stock_admins(admin.site)  # the user and group admins, bounded as the project's are

DOCS = [DocsAccess]  # the schema and its page: operators only, unless debug or opted out

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("favicon.ico", no_favicon),
    path("admin/dashboard/", admin.site.admin_view(dashboard), name="dashboard"),
    path("admin/", admin.site.urls),
    path("healthz", liveness, name="healthz"),
    path("readyz", ReadinessApi.as_view(), name="readyz"),
    path("api/", ApiRootView.as_view(), name="api-root"),
    path("metrics", metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=DOCS), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=DOCS),
        name="api-docs",
    ),
    path("api/", include("resilience.api.urls")),
    path("api/", include("routing.api.urls")),
    # --- the request log (omniroute.core.observability): /api/requests/ -----------------------
    path("api/", include("omniroute.core.observability.requestlog.urls")),
    # Keep last: every other /api/ path is a JSON 404, even with debug on (no route list).
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
]

# With debug off, errors outside the admin are JSON (see ``omniroute.views``).
handler400 = "omniroute.views.bad_request"
handler404 = "omniroute.views.not_found"
handler500 = "omniroute.views.server_error"
