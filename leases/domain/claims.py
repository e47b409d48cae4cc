"""Managed inference requests: what a request of a key with ``lease:exclusive`` must carry, which
routes it may take and where it may go (pure).

A managed request names its lease in two headers: the owner token (``vlo_`` + 43 base64url
characters; only its SHA-256 is kept) and the generation the client was given. Before any
upstream call the gateway checks, in order:

1. the key names the connections it may lease (else 403 ``LEASE_KEY_CONFIGURATION_INVALID``);
2. the owner header is present and not blank (400 ``LEASE_CONTEXT_REQUIRED``), the owner is
   well formed and the generation, once there is an owner, present and a decimal positive
   integer (400 ``LEASE_CONTEXT_INVALID``: a missing or empty generation is invalid, not
   required);
3. the route runs on one connection at a time: no fusion, no context relay, no pipeline of more
   than one stage, no steps pinned to different connections, also through nested combos (409
   ``LEASE_UNSUPPORTED_ROUTE``); routing resolves the route and tells its shape
   (:class:`RouteShape`);
4. the owner has an active lease (409 ``LEASE_REQUIRED``) of this generation and this key (409
   ``LEASE_FENCE_STALE``), and no step is pinned to another connection (409
   ``LEASE_CONNECTION_MISMATCH``).

The plan then becomes the bound connection's targets followed by those of the connections no
other owner holds, in the strategy's order. When the binding cannot serve (excluded, failed, or
not serving this model), the attempt on the next connection moves the lease there first, with the
same generation; the lease is re-checked right before every upstream attempt.

Routing's key and targets are read through the small protocols below (:class:`LeaseKey`,
:class:`LeaseTarget`), so nothing here knows routing's own types.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from leases.domain.errors import LeaseCode, capacity_unavailable, lease_error
from leases.domain.states import EndReason
from leases.domain.tokens import (
    GENERATION_HEADER,
    OWNER_HEADER,
    owner_hash,
    owner_is_valid,
    parse_generation,
    retry_after_seconds,
)
from omniroute.core.errors import GatewayError

Headers = Iterable[tuple[bytes, bytes]]


class LeaseKey(Protocol):
    """What leases reads of a client key (routing's ``KeyInfo`` has it)."""

    @property
    def id(self) -> int: ...
    @property
    def is_managed(self) -> bool: ...
    @property
    def allowed_connections(self) -> Collection[int]: ...


class ConnectionRef(Protocol):
    """A connection, as leases names it: by its id."""

    @property
    def id(self) -> int: ...


class LeaseTarget(Protocol):
    """What leases reads of one planned attempt (routing's ``Target`` has it)."""

    @property
    def connection(self) -> ConnectionRef: ...


TargetT = TypeVar("TargetT", bound=LeaseTarget)


@dataclass(slots=True)
class LeaseClaim:
    """The lease a managed request names, and the connection it binds as the request last saw
    it (set once the lease was read; moved when the lease is transitioned)."""

    owner_hash: str
    generation: int
    key_id: int
    connection_id: int | None = None


@dataclass(frozen=True, slots=True)
class RouteShape:
    """A combo route as routing resolves it for one request: ``combo`` is the plan's combo,
    ``fans_out`` the first combo it reaches that asks several connections for one request (its
    name and strategy; ``None`` when none does), ``pinned`` the connections its steps (nested
    combos included) are pinned to."""

    combo: str
    fans_out: tuple[str, str] | None
    pinned: frozenset[int]


class ActiveLease(Protocol):
    """What the check reads of the owner's active lease (``leases.services.LeaseView``)."""

    @property
    def generation(self) -> int: ...
    @property
    def api_key_id(self) -> int: ...
    @property
    def connection_id(self) -> int: ...


def header_value(headers: Headers, name: bytes) -> str | None:
    """The first value of header ``name`` (lower-case), stripped; ``None`` when absent."""
    for given, value in headers:
        if given == name:
            return value.decode("latin-1").strip()
    return None


def lease_claim(key: LeaseKey, headers: Headers) -> LeaseClaim | None:
    """The lease a managed key's request names (``None`` for an ordinary key), or the 403 / 400
    of checks 1 and 2. Only a missing or blank owner is ``LEASE_CONTEXT_REQUIRED``; with an
    owner, a generation that is missing, empty or not a decimal positive integer is
    ``LEASE_CONTEXT_INVALID``. The owner token itself goes no further than this function."""
    if not key.is_managed:
        return None
    if not key.allowed_connections:
        raise lease_error(LeaseCode.KEY_CONFIGURATION_INVALID)
    owner = header_value(headers, OWNER_HEADER)
    if not owner:
        raise lease_error(LeaseCode.CONTEXT_REQUIRED)
    generation = parse_generation(header_value(headers, GENERATION_HEADER) or "")
    if generation is None:
        raise lease_error(LeaseCode.CONTEXT_INVALID)
    return LeaseClaim(owner_from_header(owner), generation, key.id)


def owner_from_header(value: str | None) -> str:
    """The hash of the owner token a request carries, or 400 ``LEASE_CONTEXT_REQUIRED`` (absent
    or blank) / ``LEASE_CONTEXT_INVALID`` (malformed). The token goes no further than this."""
    if not value or not value.strip():
        raise lease_error(LeaseCode.CONTEXT_REQUIRED)
    if not owner_is_valid(value.strip()):
        raise lease_error(LeaseCode.CONTEXT_INVALID)
    return owner_hash(value.strip())


def check_lease_key(key: LeaseKey) -> None:
    """A key may hold leases: it carries ``lease:exclusive`` (else 403
    ``LEASE_SCOPE_REQUIRED``) and names the connections it may lease (else 403
    ``LEASE_KEY_CONFIGURATION_INVALID``)."""
    if not key.is_managed:
        raise lease_error(LeaseCode.SCOPE_REQUIRED)
    if not key.allowed_connections:
        raise lease_error(LeaseCode.KEY_CONFIGURATION_INVALID)


def check_route_shape(shape: RouteShape) -> None:
    """Check 3: a managed request's route must run on one connection at a time."""
    if shape.fans_out is not None:
        name, strategy = shape.fans_out
        raise lease_error(
            LeaseCode.UNSUPPORTED_ROUTE,
            f"A managed API key cannot use the combo '{shape.combo}': "
            f"'{name}' uses the {strategy} strategy, which runs on several "
            "connections for one request.",
        )
    if len(shape.pinned) > 1:
        raise lease_error(
            LeaseCode.UNSUPPORTED_ROUTE,
            f"A managed API key cannot use the combo '{shape.combo}': its steps are pinned to "
            "different connections.",
        )


def check_active(claim: LeaseClaim, active: ActiveLease | None, pinned: Collection[int]) -> int:
    """Check 4 against the owner's active lease; the connection it binds."""
    if active is None:
        raise lease_error(LeaseCode.REQUIRED)
    if active.generation != claim.generation or active.api_key_id != claim.key_id:
        raise lease_error(LeaseCode.FENCE_STALE)
    if pinned and active.connection_id not in pinned:
        raise lease_error(LeaseCode.CONNECTION_MISMATCH)
    return active.connection_id


def foreign_holds(occupancy: Mapping[int, tuple[str, datetime]], owner: str) -> dict[int, datetime]:
    """When each connection held by another owner's active lease frees up."""
    return {
        connection: expires
        for connection, (held_by, expires) in occupancy.items()
        if held_by != owner
    }


def leased_targets(
    targets: Sequence[TargetT], binding: int, held: Collection[int]
) -> tuple[TargetT, ...]:
    """The bound connection's targets, then those of connections no other owner holds; each
    group in the given order."""
    bound = [t for t in targets if t.connection.id == binding]
    free = [t for t in targets if t.connection.id != binding and t.connection.id not in held]
    return (*bound, *free)


def capacity_error(
    connections: Collection[int], held: Mapping[int, datetime], now: datetime
) -> GatewayError:
    """429 ``LEASE_CAPACITY_UNAVAILABLE`` when another owner holds every one of
    ``connections``: ``Retry-After`` says when the first of those leases expires."""
    expiries = [held[c] for c in connections if c in held]
    retry_after = retry_after_seconds(min(expiries) if expiries else None, now)
    free = sum(1 for c in connections if c not in held)
    return capacity_unavailable(retry_after, len(connections), free)


def transition_reason(
    binding: int | None, targets: Sequence[LeaseTarget], excluded: Iterable[int]
) -> EndReason:
    """Why a lease moves off its binding: the binding does not serve this request's model, an
    eligibility filter excluded it, or its attempt failed."""
    if binding is None or all(t.connection.id != binding for t in targets):
        return EndReason.MODEL_INELIGIBLE
    if binding in set(excluded):
        return EndReason.CONNECTION_INELIGIBLE
    return EndReason.HEALTH_OR_COOLDOWN


def distinct_connections(targets: Iterable[LeaseTarget]) -> tuple[int, ...]:
    """The connections of ``targets``, each once, in order."""
    return tuple(dict.fromkeys(t.connection.id for t in targets))
