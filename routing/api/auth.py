"""Management API authentication: a staff session, or a client key with the ``manage`` scope."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from routing.domain.config.keys import hash_key
from routing.domain.config.vocabulary import Scope
from routing.models import ClientApiKey


class KeyUser(AnonymousUser):
    """The request user when a client key authenticated (never staff, never a DB user)."""

    def __init__(self, key: ClientApiKey) -> None:
        super().__init__()
        self.key = key

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    def __str__(self) -> str:
        return f"key:{self.key.prefix}"


def _presented(request: Request) -> str | None:
    header = str(request.META.get("HTTP_AUTHORIZATION", ""))
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    api_key = str(request.META.get("HTTP_X_API_KEY", "")).strip()
    return api_key or None


class ClientKeyAuthentication(BaseAuthentication):
    """``Authorization: Bearer <key>`` or ``x-api-key``, checked against stored hashes."""

    def authenticate(self, request: Request) -> tuple[KeyUser, ClientApiKey] | None:
        presented = _presented(request)
        if presented is None:
            return None
        key = ClientApiKey.objects.filter(key_hash=hash_key(presented)).first()
        if key is None or not key.is_usable(timezone.now()):
            raise exceptions.AuthenticationFailed("The API key is invalid, revoked or expired.")
        return KeyUser(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="omniroute"'


def has_scope(request: Request, scope: str) -> bool:
    """Whether the request's client key carries ``scope``."""
    key = request.auth if isinstance(request.auth, ClientApiKey) else None
    return key is not None and scope in (key.scopes or [])


class IsOperator(BasePermission):
    """Staff users, and client keys with the ``manage`` scope."""

    message = "This endpoint needs a staff session or an API key with the 'manage' scope."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is not None and getattr(user, "is_staff", False) and user.is_active:
            return True
        return has_scope(request, Scope.MANAGE)


class ClientKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call, unused-ignore]
    """Documents ``ClientKeyAuthentication``: a Bearer token or ``x-api-key`` (either one)."""

    target_class = "routing.api.auth.ClientKeyAuthentication"
    name = ["clientKeyBearer", "clientKeyHeader"]

    def get_security_requirement(self, auto_schema: Any) -> list[dict[str, list[Any]]]:
        return [{"clientKeyBearer": []}, {"clientKeyHeader": []}]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        bearer = build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix="Bearer"
        )
        return [bearer, {"type": "apiKey", "in": "header", "name": "x-api-key"}]
