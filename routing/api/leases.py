"""``POST /api/v1/session-leases``: the lifecycle of exclusive session leases
(reference-part2 §2.7; spec decision 9).

The view lives in routing, not in ``leases``: every step before the lease write is routing's
(the client key against the configuration snapshot, model resolution, the key's allowed
connections, the connections' cooldown state), and ``leases`` may not import routing. So
``leases`` stays the table and its services, and this view calls them as the proxy does.

The checks run in the spec's order, and the first that fails answers:

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
8. the action itself (``routing.lease_lifecycle``).

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
from django.core.exceptions import RequestDataTooBig
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leases.domain.states import RELEASE_REASONS
from leases.domain.tokens import MAX_SAFE_INTEGER
from routing.domain.auth import presented_key
from routing.domain.config import ConfigSnapshot, KeyInfo
from routing.domain.errors import GatewayError
from routing.domain.keys import hash_key
from routing.domain.lease_actions import (
    LeaseAction,
    LeaseRequest,
    is_json_media_type,
    parse_lease_request,
)
from routing.domain.lease_errors import LeaseCode, lease_error
from routing.domain.lease_routing import check_lease_key, check_lease_model, owner_from_header
from routing.lease_lifecycle import (
    lease_lifecycle_acquire,
    lease_lifecycle_release,
    lease_lifecycle_renew,
    lease_lifecycle_status,
)
from routing.snapshot import current_snapshot

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
# One JSON object told apart by ``action`` (routing.domain.lease_actions).
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

    @extend_schema(request=None, responses={204: None})
    def options(self, request: Request, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        """The CORS preflight: 204, naming the lease headers as allowed."""
        return Response(status=204, headers=CORS_HEADERS)

    @extend_schema(
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
        except Exception:  # a lease answer is never a 500 (reference-part2 §2.7 step 11)
            logger.exception("a session lease request failed")
            return _error_response(lease_error(LeaseCode.SERVICE_UNAVAILABLE))

    def _serve(self, request: Request) -> dict[str, Any]:
        now = clock()
        snapshot = async_to_sync(current_snapshot)()
        key = _authenticate(snapshot, request, now)
        if not is_json_media_type(str(request.META.get("CONTENT_TYPE", ""))):
            raise lease_error(LeaseCode.CONTENT_TYPE_REQUIRED)
        try:
            body = request.body
        except RequestDataTooBig:
            raise lease_error(LeaseCode.ACTION_INVALID, "The request body is too large.") from None
        action = parse_lease_request(body)
        if action.action is LeaseAction.ACQUIRE:
            check_lease_model(snapshot, key, action.model)
        check_lease_key(key)
        owner = owner_from_header(request.META.get("HTTP_X_OMNIROUTE_LEASE_OWNER"))
        return _perform(snapshot, key, owner, action, now)


def _error_response(error: GatewayError) -> Response:
    body = orjson.loads(error.body())
    return Response(body, status=error.status, headers={**CORS_HEADERS, **error.headers})


KEY_HEADERS = ((b"authorization", "HTTP_AUTHORIZATION"), (b"x-api-key", "HTTP_X_API_KEY"))


def _header(request: Request, meta: str) -> bytes:
    return str(request.META.get(meta, "")).encode("latin-1", "replace")


def _authenticate(snapshot: ConfigSnapshot, request: Request, now: datetime) -> KeyInfo:
    presented = presented_key((name, _header(request, meta)) for name, meta in KEY_HEADERS)
    if presented is None:
        raise lease_error(LeaseCode.AUTHENTICATION_REQUIRED)
    key = snapshot.keys_by_hash.get(hash_key(presented))
    if key is None or not key.is_usable(now):
        raise lease_error(LeaseCode.API_KEY_INVALID)
    return key


def _perform(
    snapshot: ConfigSnapshot, key: KeyInfo, owner: str, action: LeaseRequest, now: datetime
) -> dict[str, Any]:
    if action.action is LeaseAction.ACQUIRE:
        return lease_lifecycle_acquire(
            snapshot=snapshot, key=key, owner=owner, model=action.model, now=now
        )
    if action.action is LeaseAction.STATUS:
        return lease_lifecycle_status(
            snapshot=snapshot, key=key, owner=owner, generation=action.generation, now=now
        )
    if action.action is LeaseAction.RENEW:
        return lease_lifecycle_renew(key=key, owner=owner, generation=action.generation, now=now)
    return lease_lifecycle_release(
        key=key, owner=owner, generation=action.generation, reason=action.reason, now=now
    )
