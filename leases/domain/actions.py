"""The lifecycle API's request and answer bodies (pure).

``POST /api/v1/session-leases`` takes one JSON object, told apart by ``action``:

- ``{"action": "acquire", "model": "<1..512 characters, trimmed>"}``
- ``{"action": "status", "generation": N}``, ``{"action": "renew", "generation": N}``
- ``{"action": "release", "generation": N, "reason"?: "OWNER_EXIT" | "CLIENT_CANCELLED"}``

where ``N`` is a JSON integer from 1 to 2^53 - 1 (what a JavaScript client counts exactly; not a
string, a boolean or ``1.0``). Other fields are ignored. Answers carry the lease's lifecycle, never
its connection id, owner or credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

import orjson

from leases.domain.errors import LeaseCode, lease_error
from leases.domain.states import RELEASE_REASONS, EndReason
from leases.domain.tokens import MAX_SAFE_INTEGER
from omniroute.core.bounds import DEFAULT_MAX_JSON_DEPTH, read_nesting_exceeds
from omniroute.core.errors import GatewayError

MAX_MODEL_CHARS = 512
JSON_MEDIA_TYPE = "application/json"


class LeaseAction(StrEnum):
    """What a lifecycle request asks."""

    ACQUIRE = "acquire"
    STATUS = "status"
    RENEW = "renew"
    RELEASE = "release"


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """One valid lifecycle request."""

    action: LeaseAction
    model: str = ""  # acquire
    generation: int = 0  # status, renew, release
    reason: EndReason = EndReason.OWNER_EXIT  # release


class LeaseFacts(Protocol):
    """What an answer shows of a lease (``leases.services.LeaseView`` has it)."""

    @property
    def state(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def acquired_at(self) -> datetime: ...
    @property
    def renewed_at(self) -> datetime | None: ...
    @property
    def expires_at(self) -> datetime: ...


def is_json_media_type(content_type: str) -> bool:
    """Whether a ``Content-Type`` header names JSON (its media type, before any ``;``)."""
    return content_type.partition(";")[0].strip().lower() == JSON_MEDIA_TYPE


def parse_lease_request(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> LeaseRequest:
    """The lifecycle request in ``body``, or a 400 ``LEASE_ACTION_INVALID`` saying why not (a
    body nested past ``max_depth`` levels among them, as on every other entry point)."""
    try:
        payload = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        raise _invalid("The body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise _invalid("The body must be a JSON object with an 'action'.")
    if read_nesting_exceeds(body, payload, max_depth):
        raise _invalid(f"The body nests deeper than {max_depth} levels.")
    actions = ", ".join(repr(a.value) for a in LeaseAction)
    given = payload.get("action")
    if not isinstance(given, str) or given not in set(LeaseAction):
        raise _invalid(f"'action' must be one of {actions}.")
    action = LeaseAction(given)
    if action is LeaseAction.ACQUIRE:
        return LeaseRequest(action, model=_model(payload.get("model")))
    generation = _generation(payload.get("generation"))
    if action is LeaseAction.RELEASE:
        return LeaseRequest(action, generation=generation, reason=_reason(payload))
    return LeaseRequest(action, generation=generation)


def _model(value: Any) -> str:
    model = value.strip() if isinstance(value, str) else ""
    if not 1 <= len(model) <= MAX_MODEL_CHARS:
        raise _invalid(f"'model' must be a string of 1 to {MAX_MODEL_CHARS} characters.")
    return model


def _generation(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAFE_INTEGER:
        raise _invalid("'generation' must be a positive integer (at most 2^53 - 1).")
    return int(value)


def _reason(payload: dict[str, Any]) -> EndReason:
    value = payload.get("reason", EndReason.OWNER_EXIT.value)
    if not isinstance(value, str) or value not in {reason.value for reason in RELEASE_REASONS}:
        raise _invalid("'reason' must be 'OWNER_EXIT' or 'CLIENT_CANCELLED'.")
    return EndReason(value)


def _invalid(message: str) -> GatewayError:
    return lease_error(LeaseCode.ACTION_INVALID, message)


def timestamp(moment: datetime | None) -> str | None:
    """An instant as the API writes it: ISO 8601 in UTC with milliseconds and ``Z``."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lifecycle_body(lease: LeaseFacts) -> dict[str, Any]:
    """``{state, generation, acquiredAt, renewedAt, expiresAt}``."""
    return {
        "state": str(lease.state),
        "generation": lease.generation,
        "acquiredAt": timestamp(lease.acquired_at),
        "renewedAt": timestamp(lease.renewed_at),
        "expiresAt": timestamp(lease.expires_at),
    }


def status_body(lease: LeaseFacts, name: str | None, provider: str) -> dict[str, Any]:
    """The lifecycle body with the bound connection as a person reads it: its configured name
    (``null`` when blank) and its provider's display name."""
    display_name = (name or "").strip() or None
    connection = {"displayName": display_name, "provider": provider}
    return {**lifecycle_body(lease), "connection": connection}
