"""Helpers for the lease tests: a fixed clock, owner tokens and short service calls."""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from leases.domain.tokens import owner_hash
from leases.services import LeaseResult, lease_acquire

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
KEY = 11
OTHER_KEY = 12
PROVIDER = "openai"


def at(seconds: float) -> dt.datetime:
    """``seconds`` after ``T0``."""
    return T0 + dt.timedelta(seconds=seconds)


def new_owner() -> str:
    """A fresh, well-formed owner token: ``vlo_`` + 43 base64url characters."""
    return "vlo_" + secrets.token_urlsafe(32)


def new_owner_hash() -> str:
    """The stored form of a fresh owner token."""
    return owner_hash(new_owner())


def acquire(owner: str, connection_id: int = 1, **kwargs: Any) -> LeaseResult:
    """``lease_acquire`` with the test defaults (key ``KEY``, provider, ``now = T0``)."""
    kwargs.setdefault("api_key_id", KEY)
    kwargs.setdefault("provider", PROVIDER)
    kwargs.setdefault("now", T0)
    return lease_acquire(owner_hash=owner, connection_id=connection_id, **kwargs)
