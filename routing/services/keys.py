"""Client API key writes. The plaintext exists only in the return value of ``api_key_create``.

A managed key (scope ``lease:exclusive``) must name the connections it may lease: without an
allow-list it would lease any connection, including every ordinary key's. A managed key that
stops authenticating (revoked, deactivated, deleted) or loses the scope ends its leases at once,
so its connections go back to the pool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from leases.interface import EndReason, leases_invalidate_for_key
from routing.domain.config.keys import display_prefix, generate_key, hash_key
from routing.domain.config.vocabulary import Scope
from routing.models import ClientApiKey, ProviderConnection
from routing.services._changes import announce_change

KEY_HASH = re.compile(r"[0-9a-f]{64}")
KNOWN_SCOPES = frozenset(s.value for s in Scope)
LEASE_KEY_POLICY_INVALID = "LEASE_KEY_POLICY_INVALID"
LEASE_KEY_POLICY_MESSAGE = (
    "A key with the 'lease:exclusive' scope requires explicit allowedConnections: the "
    "connections it may lease."
)


def _validate_scopes(scopes: Iterable[str]) -> list[str]:
    scopes = list(dict.fromkeys(scopes))
    unknown = sorted(set(scopes) - KNOWN_SCOPES)
    if unknown:
        raise ValidationError({"scopes": f"Unknown scope(s): {', '.join(unknown)}."})
    return scopes


def check_lease_policy(scopes: Iterable[str], connections: Iterable[object]) -> None:
    """A managed key names the connections it may lease."""
    if Scope.LEASE_EXCLUSIVE in scopes and not list(connections):
        error = ValidationError(LEASE_KEY_POLICY_MESSAGE, code=LEASE_KEY_POLICY_INVALID)
        raise ValidationError({"allowed_connections": error})


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
    key = api_key_restore(
        name=name,
        key_hash=hash_key(plaintext),
        prefix=display_prefix(plaintext),
        scopes=scopes,
        allowed_models=allowed_models,
        allowed_connections=allowed_connections,
        expires_at=expires_at,
        is_active=is_active,
    )
    return key, plaintext


@transaction.atomic
def api_key_restore(
    *,
    name: str,
    key_hash: str,
    prefix: str,
    scopes: Iterable[str] = (),
    allowed_models: Iterable[str] = (),
    allowed_connections: Iterable[ProviderConnection] = (),
    expires_at: datetime | None = None,
    is_active: bool = True,
) -> ClientApiKey:
    """Save a key given its hash: a new key's (``api_key_create``), or one recreated from its
    stored hash by a configuration import, so whoever holds the plaintext keeps using it and
    the plaintext never passes through the gateway."""
    if not KEY_HASH.fullmatch(key_hash):
        raise ValidationError({"key_hash": "A key's SHA-256: 64 lower-case hex digits."})
    connections, valid_scopes = list(allowed_connections), _validate_scopes(scopes)
    check_lease_policy(valid_scopes, connections)
    key = ClientApiKey(
        name=name,
        key_hash=key_hash,
        prefix=prefix,
        scopes=valid_scopes,
        allowed_models=list(allowed_models),
        expires_at=expires_at,
        is_active=is_active,
    )
    key.full_clean()
    key.save()
    key.allowed_connections.set(connections)
    announce_change()
    return key


@transaction.atomic
def api_key_update(
    *,
    key: ClientApiKey,
    fields: dict[str, Any],
    allowed_connections: Iterable[ProviderConnection] | None = None,
) -> ClientApiKey:
    """Update a key's name, scopes, allow-lists, activity or expiry (never its secret). A key
    that is deactivated or has no ``lease:exclusive`` (any more) ends its leases, and a managed
    key the leases on connections its allow-list no longer names."""
    for name, value in fields.items():
        setattr(key, name, value)
    key.scopes = _validate_scopes(key.scopes or [])
    connections = list(
        key.allowed_connections.all() if allowed_connections is None else allowed_connections
    )
    check_lease_policy(key.scopes, connections)
    key.full_clean()
    key.save()
    key.allowed_connections.set(connections)
    if not key.is_active:
        _end_leases(key, EndReason.MANAGED_KEY_REVOKED)
    elif Scope.LEASE_EXCLUSIVE not in key.scopes:  # whatever the form wrote onto ``key``
        _end_leases(key, EndReason.AUTHORIZATION_CHANGED)
    else:
        keep = [connection.pk for connection in connections]
        leases_invalidate_for_key(
            api_key_id=key.pk, reason=EndReason.AUTHORIZATION_CHANGED, keep=keep
        )
    announce_change()
    return key


@transaction.atomic
def api_key_delete(*, key: ClientApiKey) -> None:
    """Delete a key; it stops authenticating at once and its leases end."""
    _end_leases(key, EndReason.MANAGED_KEY_REVOKED)
    key.delete()
    announce_change()


@transaction.atomic
def api_key_revoke(*, key: ClientApiKey, now: datetime) -> ClientApiKey:
    """Revoke a key for good: it stops authenticating at once."""
    if key.revoked_at is None:
        key.revoked_at = now
        key.is_active = False
        key.save(update_fields=["revoked_at", "is_active"])
        _end_leases(key, EndReason.MANAGED_KEY_REVOKED, now)
        announce_change()
    return key


def _end_leases(key: ClientApiKey, reason: EndReason, now: datetime | None = None) -> None:
    """End every active lease of ``key`` (one update; nothing to do for an ordinary key)."""
    leases_invalidate_for_key(api_key_id=key.pk, reason=reason, now=now)
