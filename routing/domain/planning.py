"""Model resolution: from the requested model name to ordered attempt targets (pure).

``provider/model`` expands to that provider's connections by priority; a combo name expands
each step in order (a pinned step to its one connection). Static exclusions (the key may not use
a connection, the connection does not serve the model, the wire format differs) are decided
here; dynamic ones (breaker, cooldown, lockout, ...) by the attempt loop's eligibility filters.
"""

from __future__ import annotations

from dataclasses import dataclass

from routing.domain.config import ConfigSnapshot, ConnectionInfo, KeyInfo, ProviderInfo
from routing.domain.errors import GatewayError
from routing.domain.vocabulary import WireFormat

SINGLE = "single"


@dataclass(frozen=True, slots=True)
class Target:
    """One candidate attempt: a connection of a provider, asked for one upstream model."""

    provider: ProviderInfo
    connection: ConnectionInfo
    model: str
    step: int = 0

    @property
    def label(self) -> str:
        return f"{self.provider.slug}/{self.model}"


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """The ordered targets for one request and how they were chosen."""

    requested_model: str
    strategy: str
    targets: tuple[Target, ...]
    combo: str | None = None


def plan_route(
    snapshot: ConfigSnapshot, model: str, key: KeyInfo, wire_format: str = WireFormat.OPENAI
) -> RoutePlan:
    """Resolve ``model`` for ``key``; raise ``GatewayError`` (404, 403, 503) when it cannot."""
    combo = snapshot.combos.get(model)
    provider_slug, _, upstream_model = model.partition("/")
    if combo is None and (not upstream_model or provider_slug not in snapshot.providers):
        raise GatewayError(404, "model_not_found", f"The model '{model}' does not exist.")
    if not key.allows_model(model):
        raise GatewayError(
            403,
            "model_not_allowed",
            f"This API key may not use the model '{model}'.",
            error_type="permission_error",
        )
    steps: list[tuple[str, str, int | None]]
    if combo is None:
        steps = [(provider_slug, upstream_model, None)]
        strategy = SINGLE
    else:
        steps = [(s.provider, s.model, s.connection_id) for s in combo.steps]
        strategy = combo.strategy
    targets, other_formats = _expand(snapshot, steps, key, wire_format)
    if not targets and other_formats:
        raise _wrong_format(model, wire_format, sorted(other_formats))
    if not targets:
        raise GatewayError(
            503,
            "all_accounts_inactive",
            f"No active connection can serve '{model}' for this key.",
            error_type="service_unavailable",
        )
    return RoutePlan(model, strategy, tuple(targets), combo.name if combo else None)


def _wrong_format(model: str, wire_format: str, formats: list[str]) -> GatewayError:
    """404 ``no_executable_targets``: the model's providers speak only other wire formats."""
    message = (
        f"No target of '{model}' speaks this API's wire format ({wire_format}); its providers "
        f"speak {', '.join(formats)}, and the gateway does not translate between formats."
    )
    diagnostics = {
        "terminalReason": "no_executable_targets", "wireFormat": wire_format,
        "targetFormats": formats,
    }  # fmt: skip
    return GatewayError(404, "no_executable_targets", message, extra={"diagnostics": diagnostics})


def _expand(
    snapshot: ConfigSnapshot,
    steps: list[tuple[str, str, int | None]],
    key: KeyInfo,
    wire_format: str,
) -> tuple[list[Target], set[str]]:
    """The targets, and the wire formats of the providers skipped for speaking another one."""
    targets: list[Target] = []
    other_formats: set[str] = set()
    for index, (slug, model, pinned) in enumerate(steps):
        provider = snapshot.providers.get(slug)
        if provider is None:
            continue
        if provider.wire_format != wire_format:
            other_formats.add(provider.wire_format)
            continue
        for connection in snapshot.connections_for(slug):
            if pinned is not None and connection.id != pinned:
                continue
            if connection.serves(model) and key.allows_connection(connection.id):
                targets.append(Target(provider, connection, model, index))
    return targets, other_formats
