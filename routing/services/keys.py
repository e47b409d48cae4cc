"""Client API key writes. The plaintext exists only in the return value of ``api_key_create``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from routing.domain.keys import display_prefix, generate_key, hash_key
from routing.domain.vocabulary import Scope
from routing.models import ClientApiKey, ProviderConnection
from routing.services._changes import announce_change

KNOWN_SCOPES = frozenset(s.value for s in Scope)


def _validate_scopes(scopes: Iterable[str]) -> list[str]:
    scopes = list(dict.fromkeys(scopes))
    unknown = sorted(set(scopes) - KNOWN_SCOPES)
    if unknown:
        raise ValidationError({"scopes": f"Unknown scope(s): {', '.join(unknown)}."})
    return scopes


@transaction.atomic
def api_key_create(
    *,
    name: str,
    scopes: Iterable[str] = (),
    allowed_models: Iterable[str] = (),
    allowed_connections: Iterable[ProviderConnection] = (),
    expires_at: datetime | None = None,
    is_active: bool = True,
) -> tuple[ClientApiKey, str]:
    """Create a key; returns it with its plaintext, which is never stored."""
    plaintext = generate_key()
    key = ClientApiKey(
        name=name,
        key_hash=hash_key(plaintext),
        prefix=display_prefix(plaintext),
        scopes=_validate_scopes(scopes),
        allowed_models=list(allowed_models),
        expires_at=expires_at,
        is_active=is_active,
    )
    key.full_clean()
    key.save()
    key.allowed_connections.set(list(allowed_connections))
    announce_change()
    return key, plaintext


@transaction.atomic
def api_key_update(
    *,
    key: ClientApiKey,
    fields: dict[str, Any],
    allowed_connections: Iterable[ProviderConnection] | None = None,
) -> ClientApiKey:
    """Update a key's name, scopes, allow-lists, activity or expiry (never its secret)."""
    for name, value in fields.items():
        setattr(key, name, value)
    key.scopes = _validate_scopes(key.scopes or [])
    key.full_clean()
    key.save()
    if allowed_connections is not None:
        key.allowed_connections.set(list(allowed_connections))
    announce_change()
    return key


@transaction.atomic
def api_key_delete(*, key: ClientApiKey) -> None:
    """Delete a key; it stops authenticating at once."""
    key.delete()
    announce_change()


@transaction.atomic
def api_key_revoke(*, key: ClientApiKey, now: datetime) -> ClientApiKey:
    """Revoke a key for good: it stops authenticating at once."""
    if key.revoked_at is None:
        key.revoked_at = now
        key.is_active = False
        key.save(update_fields=["revoked_at", "is_active"])
        announce_change()
    return key
