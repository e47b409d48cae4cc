"""The vocabulary of leases: row states, end reasons and operation outcomes.
Model choices and the API derive from these, never the reverse."""

from __future__ import annotations

from enum import StrEnum


class LeaseState(StrEnum):
    """The state of one lease row. Only ACTIVE binds; the other three are history."""

    ACTIVE = "ACTIVE"
    RELEASED = "RELEASED"
    EXPIRED = "EXPIRED"
    INVALIDATED = "INVALIDATED"


class EndReason(StrEnum):
    """Why a lease row stopped being ACTIVE."""

    AUTHORIZATION_CHANGED = "AUTHORIZATION_CHANGED"
    CLIENT_CANCELLED = "CLIENT_CANCELLED"
    CONNECTION_INELIGIBLE = "CONNECTION_INELIGIBLE"
    HEALTH_OR_COOLDOWN = "HEALTH_OR_COOLDOWN"
    MANAGED_KEY_REVOKED = "MANAGED_KEY_REVOKED"
    MODEL_INELIGIBLE = "MODEL_INELIGIBLE"
    OWNER_EXIT = "OWNER_EXIT"
    QUOTA_UNAVAILABLE = "QUOTA_UNAVAILABLE"
    TTL_EXPIRED = "TTL_EXPIRED"


# The reasons a client may give when it lets go of its own lease.
RELEASE_REASONS = frozenset({EndReason.OWNER_EXIT, EndReason.CLIENT_CANCELLED})


class LeaseOutcome(StrEnum):
    """The answer of one lease operation."""

    ACQUIRED = "ACQUIRED"
    REUSED = "REUSED"
    OWNER_ALREADY_ACTIVE = "OWNER_ALREADY_ACTIVE"
    CONNECTION_BUSY = "CONNECTION_BUSY"
    TRANSITIONED = "TRANSITIONED"
    RENEWED = "RENEWED"
    RELEASED = "RELEASED"
    INVALIDATED = "INVALIDATED"
    STALE = "STALE"
    REQUIRED = "REQUIRED"
    AUTHORIZATION_MISMATCH = "AUTHORIZATION_MISMATCH"
    CONNECTION_MISMATCH = "CONNECTION_MISMATCH"
    VALID = "VALID"


# What an operator may give as the reason of a revocation: the clock's and the client's own
# reasons (TTL_EXPIRED, OWNER_EXIT, CLIENT_CANCELLED) are not theirs to give.
REVOKE_REASONS = tuple(
    reason
    for reason in EndReason
    if reason not in {EndReason.TTL_EXPIRED, EndReason.OWNER_EXIT, EndReason.CLIENT_CANCELLED}
)
DEFAULT_REVOKE_REASON = EndReason.AUTHORIZATION_CHANGED
