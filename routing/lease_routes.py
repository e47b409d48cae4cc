"""What routing tells leases about a managed key's routes (docs/routing.md, "Exclusive leases").

The lease rules are leases' (``leases.interface``); the facts they are checked against are
routing's: which combos a route reaches and what their strategies do, which connections its
steps are pinned to, whether a model resolves and which connections a key may use for it.
"""

from __future__ import annotations

from collections.abc import Iterator

from leases.interface import LeaseCode, RouteShape, check_route_shape, lease_error
from omniroute.core.bounds import clip
from routing.domain.client.errors import GatewayError
from routing.domain.config.snapshot import ComboInfo, ConfigSnapshot, KeyInfo
from routing.domain.config.vocabulary import Strategy, WireFormat
from routing.domain.plan.planning import RoutePlan, Target, plan_route
from routing.domain.plan.resolution import MAX_COMBO_DEPTH, combo_leaves

FAN_OUT_STRATEGIES = frozenset({Strategy.FUSION, Strategy.CONTEXT_RELAY})


def check_lease_model(snapshot: ConfigSnapshot, key: KeyInfo, model: str) -> None:
    """An acquire's model resolves (a combo, or a known provider's model; else 503
    ``LEASE_SERVICE_UNAVAILABLE``) and the key may use it (else
    the proxy's own 403 ``model_not_allowed``)."""
    provider, _, upstream_model = model.partition("/")
    known = model in snapshot.combos or (bool(upstream_model) and provider in snapshot.providers)
    if not known:
        message = f"The model '{clip(model)}' could not be resolved to a provider or combo."
        raise lease_error(LeaseCode.SERVICE_UNAVAILABLE, message)
    if not key.allows_model(model):
        raise GatewayError(
            403,
            "model_not_allowed",
            f"This API key may not use the model '{clip(model)}'.",
            error_type="permission_error",
        )


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


def route_shape(snapshot: ConfigSnapshot, plan: RoutePlan) -> RouteShape | None:
    """The plan's combo route as leases checks it; ``None`` for a plain model."""
    combo = snapshot.combos.get(plan.combo or "")
    if combo is None:
        return None
    fanning = next((c for c in combos_reached(snapshot, combo) if _fans_out(c)), None)
    fans_out = (fanning.name, fanning.strategy) if fanning is not None else None
    return RouteShape(plan.combo or "", fans_out, pinned_connections(snapshot, plan))


def check_route(snapshot: ConfigSnapshot, plan: RoutePlan) -> None:
    """A managed request's route must run on one connection at a time (409
    ``LEASE_UNSUPPORTED_ROUTE`` otherwise)."""
    shape = route_shape(snapshot, plan)
    if shape is not None:
        check_route_shape(shape)
