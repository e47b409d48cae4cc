"""Management API errors in the same OpenAI shape as the proxy's.

A validation error raised with one of the gateway's documented codes (upper case, such as
``LEASE_KEY_POLICY_INVALID``) answers with that code and its message, so that clients can
tell it apart from a plain invalid field.

Nothing a client sent comes back unbounded: DRF repeats a refused choice, and settings errors
name an unknown key, so every string of an error (messages, field names) is clipped to
``MAX_ECHO_CHARS`` and every list to ``MAX_ECHO_ITEMS`` items (docs/architecture.md, bounds).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, InterfaceError, OperationalError
from django.db.models import ProtectedError
from rest_framework import exceptions, status
from rest_framework.exceptions import ErrorDetail
from rest_framework.fields import get_error_detail
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from omniroute.core.bounds import bounded

CODES = {
    400: "invalid_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    503: "service_unavailable",
}
DATABASE_DOWN = "The gateway's database is unavailable; try again later."
UNSTORABLE_VALUE = (
    "A value in the request cannot be stored or compared by the database "
    "(a NUL character, for example)."
)
_TYPES = {400: "invalid_request_error", 503: "service_unavailable"}
SPEC_CODE = re.compile(r"[A-Z][A-Z0-9_]+")


def _as_drf(exc: Exception) -> Exception:
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(get_error_detail(exc))  # codes kept
    if isinstance(exc, ProtectedError):
        error = exceptions.APIException("The object is still in use and cannot be deleted.")
        error.status_code = status.HTTP_409_CONFLICT
        return error
    if isinstance(exc, DataError):
        # PostgreSQL refuses a NUL character in a text value, even in a lookup: the request's
        # value is at fault, so a 400 (the driver's message stays out of the answer).
        return exceptions.ParseError(UNSTORABLE_VALUE)
    if isinstance(exc, OperationalError | InterfaceError):
        # An outage (connection refused, lost, locked): the caller learns nothing of the
        # server, the query or the settings, only that it may retry.
        error = exceptions.APIException(DATABASE_DOWN)
        error.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        return error
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, reshaped to ``{"error": {"message", "type", "code", "fields"?}}``."""
    response = drf_exception_handler(_as_drf(exc), context)
    if response is None:
        return None
    detail = bounded(response.data)
    error: dict[str, Any] = {
        "type": _TYPES.get(response.status_code, "api_error"),
        "code": CODES.get(response.status_code, "error"),
    }
    if isinstance(detail, dict) and set(detail) != {"detail"}:
        error["message"] = "Invalid input: " + ", ".join(sorted(detail))
        error["fields"] = detail
    else:
        error["message"] = _text(detail.get("detail") if isinstance(detail, dict) else detail)
    coded = next(_spec_coded(detail), None)
    if coded is not None:
        error["message"], error["code"] = str(coded), coded.code
    response.data = {"error": error}
    return response


def _text(detail: Any) -> str:
    """An error's message: a list of messages (a filter's) joined, never its repr."""
    if isinstance(detail, list):
        return " ".join(str(item) for item in detail)
    return str(detail)


def _spec_coded(detail: Any) -> Iterator[ErrorDetail]:
    """The error details carrying one of those documented codes, in order."""
    if isinstance(detail, dict):
        detail = list(detail.values())
    if isinstance(detail, list):
        for item in detail:
            yield from _spec_coded(item)
    elif isinstance(detail, ErrorDetail) and SPEC_CODE.fullmatch(str(detail.code or "")):
        yield detail
