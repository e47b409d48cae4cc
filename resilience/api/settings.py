"""``GET/PATCH /api/resilience``: the resilience settings document.

Auth, permission and the generic error shape are the DRF defaults in settings. A rejected patch
is a 400 with ``code: "invalid_settings"`` and ``fields`` keyed by dotted path. The OpenAPI
schemas are generated from ``SCHEMA``, so a new section documents itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from resilience.domain.settings import (
    SCHEMA,
    FieldSpec,
    Kind,
    SettingsError,
    to_document,
    unflatten,
)
from resilience.services import resilience_settings_document, resilience_settings_update


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
        else _object_schema(child, complete=complete)
        for key, child in node.items()
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    return {**schema, "required": list(properties)} if complete else schema


DOCUMENT_SCHEMA = _object_schema(unflatten(SCHEMA), complete=True)
PATCH_SCHEMA = {
    **_object_schema(unflatten(SCHEMA), complete=False),
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
    details = "; ".join(f"{path} {message}" for path, message in exc.errors.items())
    error = {
        "message": f"Invalid settings: {details}",
        "type": "invalid_request_error",
        "code": "invalid_settings",
        "fields": exc.errors,
    }
    return Response({"error": error}, status=status.HTTP_400_BAD_REQUEST)


class ResilienceSettingsApi(APIView):
    """The resilience settings: GET the resolved document, PATCH part of it."""

    parser_classes = [JSONParser]

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
        '`"ok": true`; the gateway applies it to the next request.',
        request={"application/json": PATCH_SCHEMA},
        responses={200: UPDATED_SCHEMA, 400: ERROR_SCHEMA},
    )
    def patch(self, request: Request) -> Response:
        try:
            settings = resilience_settings_update(patch=request.data)
        except SettingsError as exc:
            return _invalid(exc)
        return Response({**to_document(settings), "ok": True})
