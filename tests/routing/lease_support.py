"""Shared helpers of the lease tests: owner tokens, the lease headers, managed keys."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from routing.domain.config.vocabulary import Scope
from routing.models import ProviderConnection
from routing.services import api_key_create

OWNER = "vlo_" + "A" * 42 + "1"  # 'vlo_' + 43 base64url characters
OTHER_OWNER = "vlo_" + "b-_9" * 10 + "xyz"


def owner_of(seed: str) -> str:
    """A well-formed owner token of its own (base64url, 43 characters after the prefix)."""
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return "vlo_" + (digest + "_-" * 20)[:43]


def hashed(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()


def lease_headers(owner: str | None, generation: str | int | None) -> list[tuple[bytes, bytes]]:
    """The two lease headers a managed inference request carries (``None`` leaves one out)."""
    headers = []
    if owner is not None:
        headers.append((b"x-omniroute-lease-owner", owner.encode()))
    if generation is not None:
        headers.append((b"x-omniroute-lease-generation", str(generation).encode()))
    return headers


def managed_key(connection_ids: Iterable[int], name: str = "managed") -> tuple[int, str]:
    """A key with ``lease:exclusive`` allowed on ``connection_ids``: its id and plaintext."""
    connections = list(ProviderConnection.objects.filter(pk__in=list(connection_ids)))
    key, plaintext = api_key_create(
        name=name, scopes=[Scope.LEASE_EXCLUSIVE], allowed_connections=connections
    )
    return key.pk, plaintext
