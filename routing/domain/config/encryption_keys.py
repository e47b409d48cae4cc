"""The keys that encrypt provider secrets at rest (pure).

``OMNIROUTE_ENCRYPTION_KEY`` holds one or more Fernet keys, comma-separated, newest first:
the gateway encrypts with the first and decrypts with whichever of them fits, so a key can be
rotated without losing a stored secret (``manage.py rotatekeys`` then re-encrypts every secret
with the newest). A Fernet key is 32 random bytes in URL-safe base64 (44 characters), made by
``Fernet.generate_key()``.
"""

from __future__ import annotations

import base64
import binascii

FERNET_KEY_BYTES = 32
FERNET_KEY_CHARS = 44
# The key used when debug is on and no key is set. It is public: a gateway with debug off
# refuses to start with it.
DEV_ENCRYPTION_KEY = "mRd8f3K-R763gwAmiMZOMxIp076BR7wLf6wpT32JElE="


def _check_key(position: int, key: str) -> None:
    try:
        raw = base64.b64decode(key.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raw = b""
    if len(key) != FERNET_KEY_CHARS or len(raw) != FERNET_KEY_BYTES:
        raise ValueError(
            f"key {position} is not a Fernet key (32 bytes in URL-safe base64, 44 characters)"
        )


def parse_encryption_keys(text: str) -> tuple[str, ...]:
    """The keys newest first; ``ValueError`` says which one is malformed (by its position:
    a message never holds any part of a key)."""
    keys = tuple(part.strip() for part in text.split(",") if part.strip())
    for position, key in enumerate(keys, start=1):
        _check_key(position, key)
    if len(set(keys)) != len(keys):
        raise ValueError("a key is listed twice")
    return keys
