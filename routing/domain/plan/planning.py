"""Model resolution: from the requested model name to ordered attempt targets (pure).

``provider/model`` expands to that provider's connections by priority; a combo name expands
each step in order (a pinned step to its one connection), nested combos and provider wildcards
first (``routing.domain.plan.resolution``). A (connection, model) pair is planned once, for the
first
step that reaches it. Static exclusions are decided here: the key may not use a connection (its
allow-list, or a connection reserved for keys holding exclusive session leases), the connection
does not serve the model, the wire format differs, the catalog says the model cannot serve what
the request needs (``routing.domain.plan.compatibility``); dynamic ones (breaker, cooldown, lockout,
...) by the attempt loop's eligibility filters.

Everything but the compatibility check depends on the snapshot, the model, the key and the wire
format alone, so it is worked out once per snapshot and kept (``_expanded``): a request plans
with a dictionary lookup, and only a combo's targets are then checked against what the request
needs. The memo holds at most :data:`PLANS_KEPT` plans (a single model's name is the client's
own) and is dropped with its snapshot; an error is never kept, it is raised again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from omniroute.core.bounds import clip
from routing.domain.client.errors import GatewayError
from routing.domain.config.memo import SnapshotMemo
from routing.domain.config.snapshot import ConfigSnapshot, ConnectionInfo, KeyInfo, ProviderInfo
from routing.domain.config.vocabulary import Strategy, WireFormat
from routing.domain.plan.compatibility import (
    Incompatibility,
    Skipped,
    compatibility_error,
    fits_context,
    incompatibilities,
)
from routing.domain.plan.needs import NO_NEEDS, RequestNeeds
from routing.domain.plan.resolution import Leaf, combo_leaves

SINGLE = "single"
PLANS_KEPT = 1024  # plans remembered per snapshot; past that the memo starts again


@dataclass(frozen=True, slots=True)
class Target:
    """One candidate attempt: a connection of a provider, asked for one upstream model."""

    provider: ProviderInfo
    connection: ConnectionInfo
    model: str
    step: int = 0
    # ``provider/model``, as logs, metrics and the decision header name it: read several times
    # per request, so written once (targets are planned once per snapshot).
    label: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", f"{self.provider.slug}/{self.model}")


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """The ordered targets for one request and how they were chosen; ``skipped``: the targets
    left out because the catalog says they cannot serve the request, each with its reasons
    (``Incompatibility`` values joined by ``+``), for the decision header."""

    requested_model: str
    strategy: str
    targets: tuple[Target, ...]
    combo: str | None = None
    skipped: tuple[tuple[Target, str], ...] = ()


def plan_route(
    snapshot: ConfigSnapshot,
    model: str,
    key: KeyInfo,
    wire_format: str = WireFormat.OPENAI,
    needs: RequestNeeds | Callable[[], RequestNeeds] = NO_NEEDS,
) -> RoutePlan:
    """Resolve ``model`` for ``key``, keeping the targets that can serve ``needs`` (or what
    ``needs()`` returns: asked only for a combo); raise ``GatewayError`` (404, 403, 400, 503)
    when it cannot."""
    plan = _expanded(snapshot, model, key, wire_format)
    if plan.combo is None:  # a single model: the upstream itself is the judge
        return plan
    fail_open = snapshot.combos[model].options.compat_filter_fail_open
    wanted = needs() if callable(needs) else needs
    kept, skipped = _compatible(snapshot, plan.targets, wanted, fail_open, model)
    if not skipped:
        return plan
    return RoutePlan(model, plan.strategy, kept, plan.combo, skipped)


_plans: SnapshotMemo[tuple[str, str, KeyInfo], RoutePlan] = SnapshotMemo(PLANS_KEPT)


def _expanded(snapshot: ConfigSnapshot, model: str, key: KeyInfo, wire_format: str) -> RoutePlan:
    """Every target ``model`` resolves to for ``key`` in ``wire_format``, before the request's
    needs are checked: from the snapshot's memo, else worked out and kept (see the module
    docstring)."""
    kept = _plans.of(snapshot)
    memo = (model, wire_format, key)
    plan = kept.get(memo)
    if plan is None:
        plan = _plans.keep(kept, memo, _resolve(snapshot, model, key, wire_format))
    return plan


def _resolve(snapshot: ConfigSnapshot, model: str, key: KeyInfo, wire_format: str) -> RoutePlan:
    combo = snapshot.combos.get(model)
    provider_slug, _, upstream_model = model.partition("/")
    if combo is None and (not upstream_model or provider_slug not in snapshot.providers):
        raise GatewayError(404, "model_not_found", f"The model '{clip(model)}' does not exist.")
    if not key.allows_model(model):
        raise GatewayError(
            403,
            "model_not_allowed",
            f"This API key may not use the model '{clip(model)}'.",
            error_type="permission_error",
        )
    if combo is None:
        leaves, strategy = [Leaf(0, provider_slug, upstream_model)], SINGLE
    else:
        leaves, strategy = combo_leaves(snapshot, combo), combo.strategy
    per_step = strategy in (Strategy.FUSION, Strategy.PIPELINE)  # a step is a member or stage
    targets, other_formats = _expand(snapshot, leaves, key, wire_format, per_step=per_step)
    if not targets and other_formats:
        raise _wrong_format(model, wire_format, sorted(other_formats))
    if not targets:
        raise GatewayError(
            503,
            "all_accounts_inactive",
            f"No active connection can serve '{clip(model)}' for this key.",
            error_type="service_unavailable",
        )
    return RoutePlan(model, strategy, tuple(targets), None if combo is None else combo.name)


def _compatible(
    snapshot: ConfigSnapshot,
    targets: Sequence[Target],
    needs: RequestNeeds,
    fail_open: bool,
    model: str,
) -> tuple[tuple[Target, ...], tuple[tuple[Target, str], ...]]:
    """The targets that can serve ``needs`` and the skipped ones with their reasons. When none
    is left, ``fail_open`` (the combo's ``compatFilterFailOpen``) restores the ones skipped for
    capabilities only; the context window stays strict. Still none: the compatibility error."""
    if needs == NO_NEEDS:
        return tuple(targets), ()
    verdicts = [
        (t, incompatibilities(snapshot.catalog_entry(t.provider.slug, t.model), needs))
        for t in targets
    ]
    keep = [not reasons for _, reasons in verdicts]
    if not any(keep) and fail_open:
        keep = [fits_context(reasons) for _, reasons in verdicts]
    if not any(keep):
        raise compatibility_error(model, needs, [_skipped(t, r) for t, r in verdicts])
    kept = tuple(t for (t, _), use in zip(verdicts, keep, strict=True) if use)
    skipped = tuple((t, "+".join(r)) for (t, r), use in zip(verdicts, keep, strict=True) if not use)
    return kept, skipped


def _skipped(target: Target, reasons: tuple[Incompatibility, ...]) -> Skipped:
    return target.provider.slug, target.model, target.connection.id, reasons


def _wrong_format(model: str, wire_format: str, formats: list[str]) -> GatewayError:
    """404 ``no_executable_targets``: the model's providers speak only other wire formats."""
    message = (
        f"No target of '{clip(model)}' speaks this API's wire format ({wire_format}); "
        f"its providers speak {', '.join(formats)}, and the gateway does not translate "
        "between formats."
    )
    diagnostics = {
        "terminalReason": "no_executable_targets",
        "wireFormat": wire_format,
        "targetFormats": formats,
    }
    return GatewayError(404, "no_executable_targets", message, extra={"diagnostics": diagnostics})


def _expand(
    snapshot: ConfigSnapshot,
    leaves: Sequence[Leaf],
    key: KeyInfo,
    wire_format: str,
    *,
    per_step: bool = False,
) -> tuple[list[Target], set[str]]:
    """The targets, and the wire formats of the providers skipped for speaking another one. A
    (connection, model) pair is planned once, or once per step with ``per_step`` (a fusion
    panel or a pipeline may ask one model twice)."""
    targets: list[Target] = []
    other_formats: set[str] = set()
    planned: set[tuple[int, int, str]] = set()
    for leaf in leaves:
        provider = snapshot.providers.get(leaf.provider)
        if provider is None:
            continue
        if provider.wire_format != wire_format:
            other_formats.add(provider.wire_format)
            continue
        for connection in snapshot.connections_for(leaf.provider):
            if leaf.connection_id is not None and connection.id != leaf.connection_id:
                continue
            pair = (leaf.step if per_step else 0, connection.id, leaf.model)
            if pair in planned or not connection.serves(leaf.model):
                continue
            if snapshot.key_may_use(key, connection.id):
                planned.add(pair)
                targets.append(Target(provider, connection, leaf.model, leaf.step))
    return targets, other_formats


def serves_same_model(target: Target, other: Target) -> bool:
    """``other`` serves ``target``'s model (same provider, same upstream model id) on another
    connection: an equivalent account."""
    return (
        other.provider.slug == target.provider.slug
        and other.model == target.model
        and other.connection.id != target.connection.id
    )


def same_model_first(rest: Sequence[Target], target: Target) -> list[Target]:
    """``rest`` with the targets serving ``target``'s model on other connections first (in
    their order), then the others: where a rate-limited account's request goes at once."""
    same = [t for t in rest if serves_same_model(target, t)]
    return same + [t for t in rest if not serves_same_model(target, t)]
