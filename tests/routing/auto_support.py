"""Small builders for the ``auto`` strategy's pure tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target
from routing.strategies.auto.factors import AutoCandidate, AutoSignals, build_candidates
from routing.strategies.auto.request import RequestProfile

ALPHA = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)
BETA = ProviderInfo("beta", "Beta", "api_key", "https://beta.test/v1", WireFormat.OPENAI)


def target(
    connection_id: int,
    step: int = 0,
    *,
    model: str = "m",
    provider: ProviderInfo = ALPHA,
    max_concurrent: int | None = None,
) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider=provider.slug,
        name=f"{provider.slug}-{connection_id}",
        priority=connection_id,
        base_url=provider.base_url,
        auth_type="api_key",
        max_concurrent=max_concurrent,
    )
    return Target(provider, connection, model, step)


def signals(connection_id: int, step: int = 0, **raw: Any) -> AutoSignals:
    """Signals for a target of ALPHA (``provider=``/``model=`` pick another)."""
    place = {k: raw.pop(k) for k in ("provider", "model") if k in raw}
    return AutoSignals(target(connection_id, step, **place), **raw)


def candidates(
    pool: Sequence[AutoSignals], request: RequestProfile | None = None
) -> tuple[AutoCandidate, ...]:
    return build_candidates(pool, request or RequestProfile())


def ids(targets: Iterable[Target]) -> list[int]:
    return [t.connection.id for t in targets]


class Scripted:
    """An rng whose ``random()`` returns the given values in turn (and fails past them)."""

    def __init__(self, values: Iterable[float]) -> None:
        self._values = iter(values)
        self.calls = 0

    def random(self) -> float:
        self.calls += 1
        return next(self._values)


class Fixed:
    """An rng that always returns ``value`` (0.999: never explores)."""

    def __init__(self, value: float = 0.999) -> None:
        self.value = value

    def random(self) -> float:
        return self.value
