"""Managed inference requests: what a request of a key with ``lease:exclusive`` must carry, which
routes it may take and where it may go (pure; reference-part2 §2.8, §2.9).

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
   ``LEASE_UNSUPPORTED_ROUTE``);
4. the owner has an active lease (409 ``LEASE_REQUIRED``) of this generation and this key (409
   ``LEASE_FENCE_STALE``), and no step is pinned to another connection (409
   ``LEASE_CONNECTION_MISMATCH``).

The plan then becomes the bound connection's targets followed by those of the connections no
other owner holds, in the strategy's order. When the binding cannot serve (excluded, failed, or
not serving this model), the attempt on the next connection moves the lease there first, with the
same generation; the lease is re-checked right before every upstream attempt.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from leases.domain.states import EndReason
from leases.domain.tokens import (
    GENERATION_HEADER,
    OWNER_HEADER,
    owner_hash,
    owner_is_valid,
    parse_generation,
    retry_after_seconds,
)
from routing.domain.config import ComboInfo, ConfigSnapshot, KeyInfo
from routing.domain.errors import GatewayError
from routing.domain.lease_errors import LeaseCode, capacity_unavailable, lease_error
from routing.domain.planning import RoutePlan, Target, plan_route
from routing.domain.resolution import MAX_COMBO_DEPTH, combo_leaves
from routing.domain.vocabulary import Strategy, WireFormat

Headers = Iterable[tuple[bytes, bytes]]
FAN_OUT_STRATEGIES = frozenset({Strategy.FUSION, Strategy.CONTEXT_RELAY})


@dataclass(slots=True)
class LeaseClaim:
    """The lease a managed request names, and the connection it binds as the request last saw
    it (set once the lease was read; moved when the lease is transitioned)."""

    owner_hash: str
    generation: int
    key_id: int
    connection_id: int | None = None


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


def lease_claim(key: KeyInfo, headers: Headers) -> LeaseClaim | None:
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


def check_lease_key(key: KeyInfo) -> None:
    """A key may hold leases: it carries ``lease:exclusive`` (else 403
    ``LEASE_SCOPE_REQUIRED``) and names the connections it may lease (else 403
    ``LEASE_KEY_CONFIGURATION_INVALID``)."""
    if not key.is_managed:
        raise lease_error(LeaseCode.SCOPE_REQUIRED)
    if not key.allowed_connections:
        raise lease_error(LeaseCode.KEY_CONFIGURATION_INVALID)


def check_lease_model(snapshot: ConfigSnapshot, key: KeyInfo, model: str) -> None:
    """An acquire's model resolves (a combo, or a known provider's model; else 503
    ``LEASE_SERVICE_UNAVAILABLE``, reference-part2 §2.7 step 4) and the key may use it (else
    the proxy's own 403 ``model_not_allowed``)."""
    provider, _, upstream_model = model.partition("/")
    known = model in snapshot.combos or (bool(upstream_model) and provider in snapshot.providers)
    if not known:
        message = f"The model '{model}' could not be resolved to a provider or combo."
        raise lease_error(LeaseCode.SERVICE_UNAVAILABLE, message)
    if not key.allows_model(model):
        raise GatewayError(
            403, "model_not_allowed", f"This API key may not use the model '{model}'.",
            error_type="permission_error",
        )  # fmt: skip


def acquire_candidates(snapshot: ConfigSnapshot, key: KeyInfo, model: str) -> tuple[Target, ...]:
    """The targets an acquire may bind, one per connection, in the model's plan order: the
    ordinary plan of every wire format (a lease binds a connection, whatever API later uses it),
    which keeps only the connections the key may use."""
    targets: list[Target] = []
    for wire_format in WireFormat:
        try:
            targets += plan_route(snapshot, model, key, wire_format).targets
        except GatewayError:  # nothing of this format (or nothing at all) for this key
            continue
    targets.sort(key=lambda target: target.step)  # stable: each step keeps its own order
    chosen: dict[int, Target] = {}
    for target in targets:
        chosen.setdefault(target.connection.id, target)
    return tuple(chosen.values())


def combos_reached(snapshot: ConfigSnapshot, combo: ComboInfo) -> Iterator[ComboInfo]:
    """``combo`` and every active combo its steps reach, as deep as resolution follows them."""
    yield from _reached(snapshot, combo, ())


def _reached(
    snapshot: ConfigSnapshot, combo: ComboInfo, path: tuple[str, ...]
) -> Iterator[ComboInfo]:
    yield combo
    deeper = (*path, combo.name)
    if len(deeper) >= MAX_COMBO_DEPTH:
        return
    for step in combo.steps:
        nested = snapshot.combos.get(step.combo_ref or "")
        if nested is not None and nested.name not in deeper:
            yield from _reached(snapshot, nested, deeper)


def _fans_out(combo: ComboInfo) -> bool:
    """Whether a combo asks several connections for one request (a one-stage pipeline does not)."""
    if combo.strategy in FAN_OUT_STRATEGIES:
        return True
    return combo.strategy == Strategy.PIPELINE and len(combo.steps) > 1


def pinned_connections(snapshot: ConfigSnapshot, plan: RoutePlan) -> frozenset[int]:
    """The connections the plan's combo pins steps to (nested combos included)."""
    combo = snapshot.combos.get(plan.combo or "")
    if combo is None:
        return frozenset()
    leaves = combo_leaves(snapshot, combo)
    return frozenset(leaf.connection_id for leaf in leaves if leaf.connection_id is not None)


def check_route(snapshot: ConfigSnapshot, plan: RoutePlan) -> None:
    """Check 3: a managed request's route must run on one connection at a time."""
    combo = snapshot.combos.get(plan.combo or "")
    if combo is None:
        return
    for reached in combos_reached(snapshot, combo):
        if _fans_out(reached):
            raise lease_error(
                LeaseCode.UNSUPPORTED_ROUTE,
                f"A managed API key cannot use the combo '{plan.combo}': "
                f"'{reached.name}' uses the {reached.strategy} strategy, which runs on several "
                "connections for one request.",
            )
    if len(pinned_connections(snapshot, plan)) > 1:
        raise lease_error(
            LeaseCode.UNSUPPORTED_ROUTE,
            f"A managed API key cannot use the combo '{plan.combo}': its steps are pinned to "
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
    return {connection: expires for connection, (held_by, expires) in occupancy.items()
            if held_by != owner}  # fmt: skip


def leased_targets(
    targets: Sequence[Target], binding: int, held: Collection[int]
) -> tuple[Target, ...]:
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
    binding: int | None, targets: Sequence[Target], excluded: Iterable[int]
) -> EndReason:
    """Why a lease moves off its binding: the binding does not serve this request's model, an
    eligibility filter excluded it, or its attempt failed."""
    if binding is None or all(t.connection.id != binding for t in targets):
        return EndReason.MODEL_INELIGIBLE
    if binding in set(excluded):
        return EndReason.CONNECTION_INELIGIBLE
    return EndReason.HEALTH_OR_COOLDOWN


def distinct_connections(targets: Iterable[Target]) -> tuple[int, ...]:
    """The connections of ``targets``, each once, in order."""
    return tuple(dict.fromkeys(t.connection.id for t in targets))
