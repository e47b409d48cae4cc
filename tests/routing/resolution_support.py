"""Builders of pure configuration snapshots for the resolution and compatibility tests."""

from __future__ import annotations

from collections.abc import Iterable

from routing.domain.config.combo_options import DEFAULT_OPTIONS, ComboOptions
from routing.domain.config.snapshot import (
    CatalogEntry,
    ComboInfo,
    ComboStep,
    ConfigSnapshot,
    ConnectionInfo,
    KeyInfo,
    ProviderInfo,
)
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target


def provider(slug: str, wire_format: str = WireFormat.OPENAI) -> ProviderInfo:
    return ProviderInfo(slug, slug.title(), "api_key", f"https://{slug}.test/v1", wire_format)


def conn(id: int, provider: str, *served: str) -> ConnectionInfo:
    """Connection ``id`` of ``provider`` (priority ``id``), serving ``served`` (none: any)."""
    return ConnectionInfo(
        id=id,
        provider=provider,
        name=f"{provider}-{id}",
        priority=id,
        base_url=f"https://{provider}.test/v1",
        auth_type="api_key",
        served_models=served,
    )


def key(connections: Iterable[int] = ()) -> KeyInfo:
    return KeyInfo(
        id=1,
        name="client",
        prefix="sk-omr-xxxxx",
        scopes=frozenset(),
        allowed_models=(),
        allowed_connections=frozenset(connections),
        is_active=True,
        expires_at=None,
        revoked_at=None,
    )


def step(target: str, connection: int | None = None, weight: int = 1) -> ComboStep:
    """``provider/model`` as a step, or ``combo:<name>`` as a nested-combo step."""
    if target.startswith("combo:"):
        return ComboStep("", "", combo_ref=target.removeprefix("combo:"), weight=weight)
    slug, _, model = target.partition("/")
    return ComboStep(slug, model, connection, weight)


def combo(
    name: str, *targets: str, options: ComboOptions = DEFAULT_OPTIONS, strategy: str = "priority"
) -> ComboInfo:
    return ComboInfo(name, strategy, tuple(step(t) for t in targets), options=options)


def entry(
    label: str,
    context: int | None = None,
    tools: bool | None = None,
    structured: bool | None = None,
) -> CatalogEntry:
    slug, _, model = label.partition("/")
    return CatalogEntry(
        slug,
        model,
        context_window=context,
        supports_tools=tools,
        supports_structured_output=structured,
    )


def snapshot(
    providers: Iterable[ProviderInfo],
    connections: Iterable[ConnectionInfo],
    combos: Iterable[ComboInfo] = (),
    catalog: Iterable[CatalogEntry] = (),
) -> ConfigSnapshot:
    grouped: dict[str, list[ConnectionInfo]] = {}
    for connection in connections:
        grouped.setdefault(connection.provider, []).append(connection)
    return ConfigSnapshot(
        providers={p.slug: p for p in providers},
        connections={slug: tuple(items) for slug, items in grouped.items()},
        combos={c.name: c for c in combos},
        catalog={(e.provider, e.model): e for e in catalog},
    )


def described(targets: Iterable[Target]) -> list[tuple[str, int, int]]:
    """``(provider/model, connection id, step)`` of each target."""
    return [(t.label, t.connection.id, t.step) for t in targets]
