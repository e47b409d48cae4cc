"""The gateway's own pages outside the apps: the API root and the JSON error handlers.

Outside the admin every error is JSON in the OpenAI shape ``{"error": {"message", "type",
"code"}}``: with debug off Django would otherwise answer its HTML pages (and with debug on, a
404 page listing every route). The admin keeps Django's pages.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from omniroute.core.bounds import clip
from routing.api.auth import IsOperator

API_PREFIX = "/api/"
ADMIN_PREFIX = "/admin/"


def api_area_names() -> list[str]:
    """The names of every management API route under ``/api/`` that takes no argument.

    Read from the URL configuration itself, so an area added there is listed without more
    wiring. Detail routes (``/api/keys/<pk>/``) and format suffixes need arguments: skipped.
    """
    names: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern) and entry.name and entry.name != "api-root":
                if route.startswith("api/") and entry.pattern.regex.groups == 0:
                    names.append(entry.name)

    walk(get_resolver().url_patterns, "")
    return list(dict.fromkeys(names))


class DocsAccess(IsOperator):
    """Who may read the API root, the schema and the docs page: operators (a staff session or a
    ``manage`` key); anyone with debug on, or when ``OMNIROUTE_PUBLIC_API_DOCS`` opts in. A
    stranger learns nothing of the management surface otherwise."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if settings.DEBUG or settings.PUBLIC_API_DOCS:
            return True
        return super().has_permission(request, view)


class ApiRootView(APIView):
    """``GET /api/``: every area of the management API with its URL (private like the schema,
    see :class:`DocsAccess`)."""

    permission_classes = [DocsAccess]
    schema = None  # not an area of its own in the OpenAPI document

    def get(self, request: Request) -> Response:
        areas: dict[str, str] = {}
        for name in api_area_names():
            url = reverse(name)
            label = url.removeprefix(API_PREFIX).strip("/") or name
            areas[label] = request.build_absolute_uri(url)
        return Response(areas)


def _error(status: int, message: str, error_type: str, code: str) -> JsonResponse:
    body = {"error": {"message": message, "type": error_type, "code": code}}
    return JsonResponse(body, status=status)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: a JSON 404 (no route list) everywhere but the admin."""
    if request.path.startswith(ADMIN_PREFIX):
        return defaults.page_not_found(request, exception or Exception())
    return _error(
        404, f"There is no endpoint at {clip(request.path)}.", "invalid_request_error", "not_found"
    )


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400``: a JSON answer everywhere but the admin; a body over Django's upload
    limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``) is a 413, as on the /v1 proxy."""
    if request.path.startswith(ADMIN_PREFIX):
        return defaults.bad_request(request, exception or Exception())
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"The request body exceeds the limit of {limit} bytes."
        return _error(413, message, "invalid_request_error", "request_too_large")
    return _error(400, "The request could not be read.", "invalid_request_error", "bad_request")


@csrf_exempt  # a POST to an unknown path is a 404, not a CSRF failure page
def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """The last pattern under ``/api/``: a JSON 404 whatever ``DEBUG`` says.

    ``handler404`` only answers with debug off; with it on (``make run``) Django would answer
    its technical page, which lists every route. Matching every unknown ``/api/`` path keeps
    that page away from the management API while the admin keeps Django's own.
    """
    return not_found(request)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a JSON 500 without details everywhere but the admin."""
    if request.path.startswith(ADMIN_PREFIX):
        return defaults.server_error(request)
    return _error(
        500, "The gateway failed to handle this request.", "server_error", "internal_error"
    )


def no_favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for one on every admin page: an empty answer, not a logged 404."""
    return HttpResponse(status=204)
