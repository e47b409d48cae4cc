"""The errors of exclusive session leases, as the lifecycle API and the proxy answer them (pure;
docs/routing.md, "Exclusive leases").

Every one is OpenAI-shaped, ``{"error": {"message", "type": "lease_error", "code"}}``, and none
ever names an owner token, an owner hash, another key or a connection id. The capacity answer
(429) adds the fields a waiting client reads: ``state``, ``reason``, ``retryAfter`` and the
eligible and free candidate counts.
"""

from __future__ import annotations

from enum import StrEnum

from omniroute.core.errors import GatewayError

LEASE_ERROR_TYPE = "lease_error"
WAITING_FOR_CAPACITY = "WAITING_FOR_CAPACITY"
NO_FREE_ELIGIBLE_CONNECTION = "NO_FREE_ELIGIBLE_CONNECTION"


class LeaseCode(StrEnum):
    """The error codes of the lease API and of managed inference requests."""

    AUTHENTICATION_REQUIRED = "LEASE_AUTHENTICATION_REQUIRED"
    API_KEY_INVALID = "LEASE_API_KEY_INVALID"
    CONTENT_TYPE_REQUIRED = "LEASE_CONTENT_TYPE_REQUIRED"
    ACTION_INVALID = "LEASE_ACTION_INVALID"
    SERVICE_UNAVAILABLE = "LEASE_SERVICE_UNAVAILABLE"
    SCOPE_REQUIRED = "LEASE_SCOPE_REQUIRED"
    KEY_CONFIGURATION_INVALID = "LEASE_KEY_CONFIGURATION_INVALID"
    CONTEXT_REQUIRED = "LEASE_CONTEXT_REQUIRED"
    CONTEXT_INVALID = "LEASE_CONTEXT_INVALID"
    FENCE_STALE = "LEASE_FENCE_STALE"
    REQUIRED = "LEASE_REQUIRED"
    CONNECTION_MISMATCH = "LEASE_CONNECTION_MISMATCH"
    UNSUPPORTED_ROUTE = "LEASE_UNSUPPORTED_ROUTE"
    NO_ELIGIBLE_CONNECTION = "LEASE_NO_ELIGIBLE_CONNECTION"
    ELIGIBILITY_UNAVAILABLE = "LEASE_ELIGIBILITY_UNAVAILABLE"
    CAPACITY_UNAVAILABLE = "LEASE_CAPACITY_UNAVAILABLE"


_STATUS = {
    LeaseCode.AUTHENTICATION_REQUIRED: 401,
    LeaseCode.API_KEY_INVALID: 401,
    LeaseCode.CONTENT_TYPE_REQUIRED: 415,
    LeaseCode.ACTION_INVALID: 400,
    LeaseCode.SERVICE_UNAVAILABLE: 503,
    LeaseCode.SCOPE_REQUIRED: 403,
    LeaseCode.KEY_CONFIGURATION_INVALID: 403,
    LeaseCode.CONTEXT_REQUIRED: 400,
    LeaseCode.CONTEXT_INVALID: 400,
    LeaseCode.FENCE_STALE: 409,
    LeaseCode.REQUIRED: 409,
    LeaseCode.CONNECTION_MISMATCH: 409,
    LeaseCode.UNSUPPORTED_ROUTE: 409,
    LeaseCode.NO_ELIGIBLE_CONNECTION: 409,
    LeaseCode.ELIGIBILITY_UNAVAILABLE: 429,
    LeaseCode.CAPACITY_UNAVAILABLE: 429,
}

_MESSAGES = {
    LeaseCode.AUTHENTICATION_REQUIRED: (
        "A managed API key is required: send 'Authorization: Bearer <key>'."
    ),
    LeaseCode.API_KEY_INVALID: "The API key is invalid, revoked or expired.",
    LeaseCode.CONTENT_TYPE_REQUIRED: "Send the lease action as Content-Type: application/json.",
    LeaseCode.ACTION_INVALID: "The body is not a valid lease action.",
    LeaseCode.SERVICE_UNAVAILABLE: "The lease service is temporarily unavailable; retry shortly.",
    LeaseCode.SCOPE_REQUIRED: "This API key does not carry the 'lease:exclusive' scope.",
    LeaseCode.KEY_CONFIGURATION_INVALID: (
        "This managed API key has no allowedConnections; an operator must name the connections "
        "it may lease."
    ),
    LeaseCode.CONTEXT_REQUIRED: (
        "A managed API key must send its lease owner in X-OmniRoute-Lease-Owner."
    ),
    LeaseCode.CONTEXT_INVALID: (
        "X-OmniRoute-Lease-Owner must be 'vlo_' followed by 43 base64url characters, and an "
        "inference request must also send X-OmniRoute-Lease-Generation: a positive decimal "
        "integer without leading zeros."
    ),
    LeaseCode.FENCE_STALE: (
        "The lease generation is not the active one for this owner and key; acquire the "
        "lease again."
    ),
    LeaseCode.REQUIRED: (
        "This lease owner holds no active lease; acquire one with POST /api/v1/session-leases."
    ),
    LeaseCode.CONNECTION_MISMATCH: (
        "The request is pinned to a connection that the active lease does not bind."
    ),
    LeaseCode.UNSUPPORTED_ROUTE: (
        "A managed API key cannot use a route that runs on several connections at once."
    ),
    LeaseCode.NO_ELIGIBLE_CONNECTION: (
        "No connection this key may lease serves the requested model."
    ),
    LeaseCode.ELIGIBILITY_UNAVAILABLE: (
        "Every connection this key may lease for the model is cooling down or unavailable."
    ),
    LeaseCode.CAPACITY_UNAVAILABLE: (
        "Exclusive managed session capacity is temporarily unavailable"
    ),
}


def lease_error(
    code: LeaseCode, message: str | None = None, *, retry_after: int | None = None
) -> GatewayError:
    """The gateway error of ``code``, with its status and (unless given) its own message."""
    headers = {"retry-after": str(retry_after)} if retry_after is not None else None
    return GatewayError(
        _STATUS[code],
        code.value,
        message or _MESSAGES[code],
        error_type=LEASE_ERROR_TYPE,
        headers=headers,
    )


def capacity_unavailable(retry_after: int, eligible: int, free: int) -> GatewayError:
    """429 ``LEASE_CAPACITY_UNAVAILABLE``: there were eligible
    connections, but another owner's lease holds every free one. ``Retry-After`` and
    ``retryAfter`` say when the first of those leases expires."""
    error = lease_error(LeaseCode.CAPACITY_UNAVAILABLE, retry_after=retry_after)
    error.extra = {
        "state": WAITING_FOR_CAPACITY,
        "reason": NO_FREE_ELIGIBLE_CONNECTION,
        "retryAfter": retry_after,
        "eligibleCount": eligible,
        "freeCount": free,
    }
    return error
