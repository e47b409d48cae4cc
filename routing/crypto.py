"""Encryption at rest for provider secrets.

Fernet gives authenticated encryption: a tampered ciphertext raises instead of decrypting to
garbage. The keys come from ``OMNIROUTE_ENCRYPTION_KEY`` (``settings.ENCRYPTION_KEYS``, newest
first): the gateway encrypts with the first and decrypts with any of them (``MultiFernet``).
Secrets written before that variable existed were encrypted with a key derived from
``OMNIROUTE_SECRET_KEY`` with HKDF; that legacy key stays last in the list, for decryption
only, until ``manage.py rotatekeys`` has re-encrypted them with the newest key.
"""

from __future__ import annotations

import base64
import enum
from functools import cache
from urllib.parse import urlsplit, urlunsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

HKDF_INFO = b"omniroute provider secret v1"


class Reencryption(enum.StrEnum):
    """What ``reencrypt_secret`` found a stored secret to be."""

    CURRENT = "current"  # already under the newest key: left as it is
    ROTATED = "rotated"  # decrypted by an older key, now under the newest
    UNREADABLE = "unreadable"  # no configured key decrypts it: left as it is


def legacy_key(secret_key: str) -> bytes:
    """The Fernet key the gateway derived from its Django secret key before
    ``OMNIROUTE_ENCRYPTION_KEY`` existed."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(derived)


@cache
def _keyring(keys: tuple[str, ...], secret_key: str) -> tuple[Fernet, MultiFernet]:
    newest = Fernet(keys[0])
    older = [Fernet(key) for key in keys[1:]]
    return newest, MultiFernet([newest, *older, Fernet(legacy_key(secret_key))])


def keyring() -> tuple[Fernet, MultiFernet]:
    """The newest key alone, and every key (newest first, the legacy key last)."""
    return _keyring(tuple(settings.ENCRYPTION_KEYS), settings.SECRET_KEY)


def encrypt_secret(plaintext: str) -> str:
    """Encrypt ``plaintext`` with the newest key."""
    return keyring()[0].encrypt(plaintext.encode()).decode()


def decrypt_secret(ciphertext: str) -> str | None:
    """Decrypt a stored secret with any configured key; ``None`` when none of them fits."""
    if not ciphertext:
        return None
    try:
        return keyring()[1].decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        return None


def reencrypt_secret(ciphertext: str) -> tuple[Reencryption, str]:
    """The stored form of ``ciphertext`` under the newest key, and what was done to it.

    A secret the newest key already reads is returned unchanged, so re-encrypting twice is the
    same as once.
    """
    newest, every = keyring()
    token = ciphertext.encode()
    try:
        newest.decrypt(token)
        return Reencryption.CURRENT, ciphertext
    except InvalidToken:
        pass
    try:
        return Reencryption.ROTATED, every.rotate(token).decode()
    except InvalidToken:
        return Reencryption.UNREADABLE, ciphertext


def mask_secret(plaintext: str | None) -> str:
    """A display form that never reveals more than the last four characters."""
    if not plaintext:
        return ""
    tail = plaintext[-4:] if len(plaintext) >= 12 else ""
    return f"••••{tail}"


def mask_url_credentials(url: str) -> str:
    """``http://user:pass@host:port`` → ``http://user:••••@host:port``: a proxy URL for display."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:••••@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
