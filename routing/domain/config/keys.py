"""Client API key maths: generation, hashing, usability and model permission (pure)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime

from omniroute.core.digest import sha256_hex

KEY_PREFIX = "sk-omr-"
DISPLAY_PREFIX_CHARS = 12


def generate_key() -> str:
    """A new client key: a fixed prefix and 32 bytes of randomness."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(plaintext: str) -> str:
    """The SHA-256 hex digest under which a key is stored and looked up."""
    return sha256_hex(plaintext.encode())


def display_prefix(plaintext: str) -> str:
    """The part of a key shown to operators to recognise it."""
    return plaintext[:DISPLAY_PREFIX_CHARS]


def key_is_usable(
    *, is_active: bool, revoked_at: datetime | None, expires_at: datetime | None, now: datetime
) -> bool:
    """Active, not revoked and not expired at ``now``."""
    if not is_active or revoked_at is not None:
        return False
    return expires_at is None or expires_at > now


def model_is_allowed(model: str, allowed: Iterable[str]) -> bool:
    """Whether ``model`` matches an allow-list; an empty list allows everything.

    Entries are exact names (`openai/gpt-4o`, a combo name) or provider wildcards (`openai/*`).
    """
    patterns = tuple(allowed)
    if not patterns:
        return True
    for pattern in patterns:
        if pattern == model or pattern == "*":
            return True
        if pattern.endswith("/*") and model.startswith(pattern[:-1]):
            return True
    return False
