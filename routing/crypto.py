"""Encryption at rest for provider secrets.

The key is derived from ``OMNIROUTE_SECRET_KEY`` with HKDF, so rotating that secret makes
stored provider secrets unreadable (operators re-enter them). Fernet gives authenticated
encryption: a tampered ciphertext raises instead of decrypting to garbage.
"""

from __future__ import annotations

import base64
from functools import cache
from urllib.parse import urlsplit, urlunsplit

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

HKDF_INFO = b"omniroute provider secret v1"


@cache
def _fernet(secret_key: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(
        secret_key.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt_secret(plaintext: str) -> str:
    """Encrypt ``plaintext`` with the key derived from the current secret key."""
    return _fernet(settings.SECRET_KEY).encrypt(plaintext.encode()).decode()


def decrypt_secret(ciphertext: str) -> str | None:
    """Decrypt a stored secret; ``None`` when it was written under another secret key."""
    if not ciphertext:
        return None
    try:
        return _fernet(settings.SECRET_KEY).decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        return None


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
