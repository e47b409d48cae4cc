"""Client authentication against the snapshot (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from routing.domain.client.errors import GatewayError
from routing.domain.config.keys import hash_key
from routing.domain.config.snapshot import ConfigSnapshot, KeyInfo


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The key from ``Authorization: Bearer`` or, failing that, ``x-api-key``."""
    bearer = api_key = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                bearer = token.strip()
        elif name == b"x-api-key" and value.strip():
            api_key = value.decode("latin-1").strip()
    return bearer or api_key


def authenticate(snapshot: ConfigSnapshot, presented: str | None, now: datetime) -> KeyInfo:
    """The usable key behind ``presented``, or a 401."""
    if not presented:
        raise GatewayError(
            401,
            "missing_api_key",
            "No API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.",
            error_type="authentication_error",
        )
    key = snapshot.keys_by_hash.get(hash_key(presented))
    if key is None or not key.is_usable(now):
        raise GatewayError(
            401,
            "invalid_api_key",
            "The API key is invalid, revoked or expired.",
            error_type="authentication_error",
        )
    return key
