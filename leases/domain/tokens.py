"""Lease owner tokens, generations, TTLs and retry hints.

A lease owner is an opaque token the client makes up: ``vlo_`` followed by exactly 43
base64url characters. The gateway keeps only its SHA-256, never the token itself, so a
database dump cannot be replayed as a lease. A generation is the fence a client repeats on
every request; it travels as a plain decimal header.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

from omniroute.core.digest import sha256_hex

OWNER_HEADER = b"x-omniroute-lease-owner"
GENERATION_HEADER = b"x-omniroute-lease-generation"

OWNER_PREFIX = "vlo_"
OWNER_TOKEN_CHARS = 43
_OWNER_PATTERN = re.compile(r"vlo_[A-Za-z0-9_-]{43}")
# A positive decimal integer without a sign, spaces or leading zeros ([0-9], not \d: no other
# scripts' digits).
_GENERATION_PATTERN = re.compile(r"[1-9][0-9]*")
MAX_SAFE_INTEGER = 2**53 - 1  # what a JavaScript client can count to exactly
_MAX_GENERATION_DIGITS = len(str(MAX_SAFE_INTEGER))

DEFAULT_TTL_MS = 120_000
MIN_TTL_MS = 1_000
MAX_TTL_MS = 1_800_000

MIN_RETRY_AFTER_SECONDS = 1
MAX_RETRY_AFTER_SECONDS = 3_600


def owner_is_valid(value: str) -> bool:
    """Whether ``value`` is a well-formed owner token: ``vlo_`` + exactly 43 base64url chars."""
    return isinstance(value, str) and _OWNER_PATTERN.fullmatch(value) is not None


def owner_hash(value: str) -> str:
    """The SHA-256 of an owner token, lowercase hex: the only form the gateway stores."""
    return sha256_hex(value.encode("utf-8"))


def parse_generation(value: str) -> int | None:
    """The generation a header carries, or None unless it is a decimal positive safe integer
    without leading zeros (``1``, ``42``; never ``0``, ``01``, ``-1``, ``+1`` or ``1.0``)."""
    if not isinstance(value, str) or len(value) > _MAX_GENERATION_DIGITS:
        return None
    if _GENERATION_PATTERN.fullmatch(value) is None:
        return None
    generation = int(value)
    return generation if generation <= MAX_SAFE_INTEGER else None


def clamp_ttl_ms(ttl_ms: int | None) -> int:
    """A lease's time to live: 120 000 ms unless asked, always within [1 000, 1 800 000]."""
    if ttl_ms is None:
        return DEFAULT_TTL_MS
    return min(MAX_TTL_MS, max(MIN_TTL_MS, int(ttl_ms)))


def retry_after_seconds(expires_at: datetime | None, now: datetime) -> int:
    """Whole seconds until ``expires_at`` for a ``Retry-After``, rounded up and kept within
    [1, 3600]; 1 when the expiry is unknown."""
    if expires_at is None:
        return MIN_RETRY_AFTER_SECONDS
    seconds = math.ceil((expires_at - now).total_seconds())
    return min(MAX_RETRY_AFTER_SECONDS, max(MIN_RETRY_AFTER_SECONDS, seconds))
