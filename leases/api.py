"""``POST /api/v1/session-leases``: the lifecycle of exclusive session leases.

Every step before the lease write that only routing knows (the client key against the
configuration snapshot, model resolution, the key's allowed connections, the connections'
cooldown state) is asked through the access routing installs at start-up
(``leases.access``): leases never imports routing.

The checks run in a fixed order, and the first that fails answers:

1. no key → 401 ``LEASE_AUTHENTICATION_REQUIRED``; an unusable key → 401 ``LEASE_API_KEY_INVALID``;
2. the body is not ``application/json`` → 415 ``LEASE_CONTENT_TYPE_REQUIRED``;
3. the body is not a valid action → 400 ``LEASE_ACTION_INVALID``;
4. acquire: a model that does not resolve → 503 ``LEASE_SERVICE_UNAVAILABLE``;
5. acquire: a model the key may not use → the proxy's own 403 ``model_not_allowed``;
6. no ``lease:exclusive`` → 403 ``LEASE_SCOPE_REQUIRED``; no allowed connections → 403
   ``LEASE_KEY_CONFIGURATION_INVALID``;
7. no owner header (or a blank one) → 400 ``LEASE_CONTEXT_REQUIRED``; a malformed one → 400
   ``LEASE_CONTEXT_INVALID`` (the generation travels in the body here, checked at step 3; on
   inference requests a missing or malformed generation header is ``LEASE_CONTEXT_INVALID``);
8. the action itself (``leases.lifecycle``).

Anything unexpected answers 503 ``LEASE_SERVICE_UNAVAILABLE``, never a 500. Every answer allows
cross-origin callers (the key travels in a header, never in a cookie).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leases.access import KeyRefusal, KeyRouting, routing_access
from leases.domain.actions import (
    LeaseAction,
    LeaseRequest,
    is_json_media_type,
    parse_lease_request,
)
from leases.domain.claims import Headers, check_lease_key, owner_from_header
from leases.domain.errors import LeaseCode, lease_error
from leases.domain.states import RELEASE_REASONS
from leases.domain.tokens import MAX_SAFE_INTEGER
from leases.lifecycle import (
    lease_lifecycle_acquire,
    lease_lifecycle_release,
    lease_lifecycle_renew,
    lease_lifecycle_status,
)
from omniroute.core.errors import GatewayError

logger = logging.getLogger(__name__)

clock: Callable[[], datetime] = timezone.now  # the edge's clock: tests move it

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, OPTIONS",
    "Access-Control-Allow-Headers": (
        "Authorization, Content-Type, X-OmniRoute-Lease-Owner, X-OmniRoute-Lease-Generation"
    ),
    "Access-Control-Max-Age": "600",
}

_GENERATION = {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER}
# One JSON object told apart by ``action`` (leases.domain.actions).
LEASE_ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "required": ["action", "model"],
            "properties": {
                "action": {"enum": [LeaseAction.ACQUIRE.value]},
                "model": {"type": "string", "minLength": 1, "maxLength": 512, "pattern": r"\S"},
            },
        },
        {
            "type": "object",
            "required": ["action", "generation"],
            "properties": {
                "action": {"enum": [LeaseAction.STATUS.value, LeaseAction.RENEW.value]},
                "generation": _GENERATION,
            },
        },
        {
            "type": "object",
            "required": ["action", "generation"],
            "properties": {
                "action": {"enum": [LeaseAction.RELEASE.value]},
                "generation": _GENERATION,
                "reason": {"enum": sorted(RELEASE_REASONS)},
            },
        },
    ]
}
LEASE_RESPONSES: dict[int, OpenApiResponse] = {
    200: OpenApiResponse({"type": "object"}, description="The lease's lifecycle."),
    400: OpenApiResponse(description="Not a lease action, or no valid owner header."),
    401: OpenApiResponse(description="No key, or an unusable one."),
    403: OpenApiResponse(description="A model or a scope the key may not use."),
    409: OpenApiResponse(description="A stale generation, no lease, or no eligible connection."),
    415: OpenApiResponse(description="The body is not application/json."),
    429: OpenApiResponse(description="Every eligible connection is cooling down or held."),
    503: OpenApiResponse(description="The model does not resolve, or the service is down."),
}


class JsonOnly(BaseContentNegotiation):
    """Every lease answer is JSON, whatever the client accepts."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: Any, format_suffix: str | None = None
    ) -> tuple[Any, str]:
        renderer = renderers[0]
        return renderer, renderer.media_type


class SessionLeaseApi(APIView):
    """Acquire, inspect, renew and release an exclusive session lease."""

    authentication_classes = ()  # its own: the key is checked after nothing, as step 1
    permission_classes = ()
    renderer_classes = (JSONRenderer,)
    content_negotiation_class = JsonOnly  # an ``Accept`` it cannot meet is no 406 before step 1

    @extend_schema(summary="CORS preflight of the lease API", request=None, responses={204: None})
    def options(self, request: Request, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        """The CORS preflight: 204, naming the lease headers as allowed."""
        return Response(status=204, headers=CORS_HEADERS)

    @extend_schema(
        summary="Acquire, check, renew or release an exclusive session lease",
        request={"application/json": LEASE_ACTION_SCHEMA},
        responses=LEASE_RESPONSES,
        parameters=[
            OpenApiParameter(
                "X-OmniRoute-Lease-Owner",
                str,
                OpenApiParameter.HEADER,
                required=True,
                pattern=r"^vlo_[A-Za-z0-9_-]{43}$",
                description="The owner token: ``vlo_`` and 43 base64url characters.",
            )
        ],
    )
    def post(self, request: Request) -> Response:
        """One lifecycle action: ``acquire``, ``status``, ``renew`` or ``release``."""
        try:
            return Response(self._serve(request), headers=CORS_HEADERS)
        except GatewayError as error:
            return _error_response(error)
        except Exception:  # a lease answer is never a 500
            logger.exception("a session lease request failed")
            return _error_response(lease_error(LeaseCode.SERVICE_UNAVAILABLE))

    def _serve(self, request: Request) -> dict[str, Any]:
        now = clock()
        routing = _authenticate(request, now)
        if not is_json_media_type(str(request.META.get("CONTENT_TYPE", ""))):
            raise lease_error(LeaseCode.CONTENT_TYPE_REQUIRED)
        try:
            body = request.body
        except RequestDataTooBig:
            raise lease_error(LeaseCode.ACTION_INVALID, "The request body is too large.") from None
        action = parse_lease_request(body, max_depth=settings.MAX_JSON_DEPTH)
        if action.action is LeaseAction.ACQUIRE:
            routing.check_model(action.model)
        check_lease_key(routing.key)
        owner = owner_from_header(request.META.get("HTTP_X_OMNIROUTE_LEASE_OWNER"))
        return _perform(routing, owner, action, now)


def _error_response(error: GatewayError) -> Response:
    body = orjson.loads(error.body())
    return Response(body, status=error.status, headers={**CORS_HEADERS, **error.headers})


KEY_HEADERS = ((b"authorization", "HTTP_AUTHORIZATION"), (b"x-api-key", "HTTP_X_API_KEY"))


def _header(request: Request, meta: str) -> bytes:
    return str(request.META.get(meta, "")).encode("latin-1", "replace")


def _authenticate(request: Request, now: datetime) -> KeyRouting:
    """The key the request presents, as routing's current configuration knows it."""
    headers: Headers = [(name, _header(request, meta)) for name, meta in KEY_HEADERS]
    found = async_to_sync(routing_access().authenticate)(headers, now)
    if found is KeyRefusal.MISSING:
        raise lease_error(LeaseCode.AUTHENTICATION_REQUIRED)
    if isinstance(found, KeyRefusal):
        raise lease_error(LeaseCode.API_KEY_INVALID)
    return found


def _perform(
    routing: KeyRouting, owner: str, action: LeaseRequest, now: datetime
) -> dict[str, Any]:
    key = routing.key
    if action.action is LeaseAction.ACQUIRE:
        return lease_lifecycle_acquire(routing=routing, owner=owner, model=action.model, now=now)
    if action.action is LeaseAction.STATUS:
        return lease_lifecycle_status(
            routing=routing, owner=owner, generation=action.generation, now=now
        )
    if action.action is LeaseAction.RENEW:
        return lease_lifecycle_renew(key=key, owner=owner, generation=action.generation, now=now)
    return lease_lifecycle_release(
        key=key, owner=owner, generation=action.generation, reason=action.reason, now=now
    )
