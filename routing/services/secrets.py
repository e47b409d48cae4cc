"""Re-encrypting every stored provider secret with the newest encryption key."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from routing.crypto import Reencryption, reencrypt_secret
from routing.models import ProviderConnection

SECRET_COLUMNS = ("secret_encrypted", "refresh_secret_encrypted")


@dataclass(frozen=True, slots=True)
class SecretRotation:
    """What one pass found: stored secrets (not connections) by outcome."""

    rotated: int
    current: int
    unreadable: int
    unreadable_connections: tuple[int, ...]  # ids of connections holding an unreadable secret


@transaction.atomic
def secrets_rotate() -> SecretRotation:
    """Re-encrypt every stored secret that an older key (or the legacy key derived from the
    Django secret key) decrypts with the newest one, in one transaction.

    A secret already under the newest key is left alone, so a second pass changes nothing; one
    that no configured key decrypts is left as it is and reported by its connection's id. The
    plaintexts do not change, so routing snapshots stay valid.
    """
    counts: Counter[Reencryption] = Counter()
    unreadable: list[int] = []
    stored = Q(secret_encrypted__gt="") | Q(refresh_secret_encrypted__gt="")
    rows = ProviderConnection.objects.select_for_update().filter(stored).order_by("pk")
    for pk, *ciphertexts in rows.values_list("pk", *SECRET_COLUMNS):
        changes: dict[str, str] = {}
        for column, ciphertext in zip(SECRET_COLUMNS, ciphertexts, strict=True):
            if not ciphertext:
                continue
            outcome, stored_form = reencrypt_secret(ciphertext)
            counts[outcome] += 1
            if outcome is Reencryption.ROTATED:
                changes[column] = stored_form
            elif outcome is Reencryption.UNREADABLE and pk not in unreadable:
                unreadable.append(pk)
        if changes:
            ProviderConnection.objects.filter(pk=pk).update(**changes)
    return SecretRotation(
        rotated=counts[Reencryption.ROTATED],
        current=counts[Reencryption.CURRENT],
        unreadable=counts[Reencryption.UNREADABLE],
        unreadable_connections=tuple(unreadable),
    )
