"""``GET/PATCH /api/resilience``: the resilience settings document.

Auth, permission and the generic error shape are the DRF defaults in settings. A rejected patch
is a 400 with ``code: "invalid_settings"`` and ``fields`` keyed by dotted path. A patch that
sets a retired field (``modelLockout.enabled``) is applied without it: the answer carries an
``X-OmniRoute-Warning`` header naming each retired field and why it went (the header the /v1
answers carry their warnings in; the body keeps the document's shape), and the gateway logs a
warning, so a client still sending it is seen before the field goes for good. There is no
``Deprecation`` header: the standard one says the whole resource is deprecated, and
``/api/resilience`` is not. The OpenAPI schemas are generated from the registered sections
(``SETTINGS``), so a new section documents itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from omniroute.core.bounds import bounded
from omniroute.core.parsers import BoundedJSONParser
from omniroute.core.settings import SETTINGS, FieldSpec, Kind, SettingsError, unflatten
from resilience.services import resilience_settings_document, resilience_settings_update

WARNING_HEADER = "X-OmniRoute-Warning"

logger = logging.getLogger(__name__)


def _leaf_schema(spec: FieldSpec) -> dict[str, Any]:
    if spec.kind is Kind.BOOL:
        return {"type": "boolean"}
    if spec.kind is Kind.OPTIONAL_BOOL:
        return {"type": "boolean", "nullable": True}
    number = {"type": "integer", "minimum": spec.minimum, "maximum": spec.maximum}
    if spec.kind is Kind.INT_LIST:
        return {"type": "array", "items": number, "minItems": 1}
    return number


def _object_schema(node: Mapping[str, Any], *, complete: bool) -> dict[str, Any]:
    properties = {
        key: _leaf_schema(child)
        if isinstance(child, FieldSpec)
        else {"deprecated": True, "description": child}
        if isinstance(child, str)  # a retired field (patch only)
        else _object_schema(child, complete=complete)
        for key, child in node.items()
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    return {**schema, "required": list(properties)} if complete else schema


DOCUMENT_SCHEMA = _object_schema(unflatten(SETTINGS.schema.fields), complete=True)
PATCH_SCHEMA = {
    **_object_schema(
        unflatten({**SETTINGS.schema.fields, **SETTINGS.schema.retired}), complete=False
    ),
    "description": "Any subset of the document (at least one section). Values are checked "
    "strictly: no coercion, no clamping; unknown keys are rejected.",
}
UPDATED_SCHEMA = {
    **DOCUMENT_SCHEMA,
    "properties": {**DOCUMENT_SCHEMA["properties"], "ok": {"type": "boolean"}},
    "required": [*DOCUMENT_SCHEMA["required"], "ok"],
}
ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string", "enum": ["invalid_request_error"]},
                # invalid_request: the body is not JSON at all (no fields then)
                "code": {"type": "string", "enum": ["invalid_settings", "invalid_request"]},
                "fields": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Dotted field path → what is wrong with it "
                    "(with invalid_settings).",
                },
            },
            "required": ["message", "type", "code"],
        }
    },
    "required": ["error"],
}


def _invalid(exc: SettingsError) -> Response:
    """The 400; an unknown key is the client's own text, so every echo is bounded."""
    fields = bounded(dict(exc.errors))
    details = "; ".join(f"{path} {message}" for path, message in fields.items())
    error = {
        "message": f"Invalid settings: {details}",
        "type": "invalid_request_error",
        "code": "invalid_settings",
        "fields": fields,
    }
    return Response({"error": error}, status=status.HTTP_400_BAD_REQUEST)


class ResilienceSettingsApi(APIView):
    """The resilience settings: GET the resolved document, PATCH part of it."""

    parser_classes = [BoundedJSONParser]

    @extend_schema(
        summary="The resolved resilience settings",
        description="Stored values over defaults and environment overrides; every field present.",
        responses={200: DOCUMENT_SCHEMA},
    )
    def get(self, request: Request) -> Response:
        return Response(resilience_settings_document())

    @extend_schema(
        summary="Change some resilience settings",
        description="Omitted fields keep their values. Returns the whole document with "
        '`"ok": true`; the gateway applies it to the next request. A retired field '
        "(`modelLockout.enabled`) is accepted and ignored for one release; the answer then "
        "carries an `X-OmniRoute-Warning` header saying so.",
        request={"application/json": PATCH_SCHEMA},
        responses={200: UPDATED_SCHEMA, 400: ERROR_SCHEMA},
    )
    def patch(self, request: Request) -> Response:
        try:
            settings = resilience_settings_update(patch=request.data)
        except SettingsError as exc:
            return _invalid(exc)
        response = Response({**SETTINGS.render(settings), "ok": True})
        _warn_retired(response, SETTINGS.retired_in(request.data))
        return response


def _warn_retired(response: Response, retired: Mapping[str, str]) -> None:
    """Tell the client (a header) and the operator (the log) which retired fields were ignored."""
    if not retired:
        return
    warnings = [f"{path} is {why}" for path, why in retired.items()]
    response[WARNING_HEADER] = " | ".join(warnings)
    for warning in warnings:
        logger.warning("settings patch: %s", warning)
