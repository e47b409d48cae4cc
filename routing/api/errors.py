"""Management API errors in the same OpenAI shape as the proxy's."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

CODES = {
    400: "invalid_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
}


def _as_drf(exc: Exception) -> Exception:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return exceptions.ValidationError(detail)
    if isinstance(exc, ProtectedError):
        error = exceptions.APIException("The object is still in use and cannot be deleted.")
        error.status_code = status.HTTP_409_CONFLICT
        return error
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, reshaped to ``{"error": {"message", "type", "code", "fields"?}}``."""
    response = drf_exception_handler(_as_drf(exc), context)
    if response is None:
        return None
    detail = response.data
    error: dict[str, Any] = {
        "type": "invalid_request_error" if response.status_code == 400 else "api_error",
        "code": CODES.get(response.status_code, "error"),
    }
    if isinstance(detail, dict) and set(detail) != {"detail"}:
        error["message"] = "Invalid input: " + ", ".join(sorted(detail))
        error["fields"] = detail
    else:
        error["message"] = str(detail.get("detail") if isinstance(detail, dict) else detail)
    response.data = {"error": error}
    return response
