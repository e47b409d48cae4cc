"""What a strategy's orderer is given and gives back: a frozen view of one request (its plan,
its facts, its body and headers) and the order it chose, with what to settle when the request
ends. An orderer never sees the request's whole context: ``routing.strategies.steps`` writes
the plan and registers the settling."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.core.store import StateStore
from routing.domain.config.combo_options import DEFAULT_OPTIONS, ComboOptions
from routing.domain.config.snapshot import ComboInfo, ConfigSnapshot
from routing.domain.plan.planning import RoutePlan, Target
from routing.proxy.context import RequestFacts

COUNTER_TTL_SECONDS = 24 * 3600.0  # a per-combo request counter in the state store

# Run when the request ends, given the target that answered (None: none did).
Settle = Callable[[Target | None], Awaitable[None] | None]


class Planned(Protocol):
    """Anything that holds a request's plan and facts (an ``OrderRequest``, or the request's
    context itself)."""

    @property
    def plan(self) -> RoutePlan: ...

    @property
    def facts(self) -> RequestFacts: ...


@dataclass(frozen=True, slots=True)
class OrderRequest:
    """One request as an orderer sees it: its plan, its facts, the client's body and its
    headers as ASGI gives them."""

    plan: RoutePlan
    facts: RequestFacts
    payload: Mapping[str, Any] | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()

    @property
    def snapshot(self) -> ConfigSnapshot:
        return self.facts.snapshot

    @property
    def combo(self) -> ComboInfo | None:
        """The plan's combo as configured (None: not a configured combo)."""
        return self.facts.snapshot.combos.get(self.plan.combo or "")

    @property
    def options(self) -> ComboOptions:
        """The combo's options, or the defaults."""
        combo = self.combo
        return combo.options if combo is not None else DEFAULT_OPTIONS

    def header_map(self) -> dict[str, str]:
        """The headers by name (a repeated one: its last value)."""
        return {k.decode("latin-1"): v.decode("latin-1") for k, v in self.headers}

    def weights(self, *, per_step: bool = False) -> list[float]:
        """Each target's combo-step weight; ``per_step``: shared by the step's targets, so that
        a step is drawn by its weight however many connections it expands to."""
        targets, combo = self.plan.targets, self.combo
        sizes = Counter(t.step for t in targets) if per_step else None
        return [
            (float(combo.steps[t.step].weight) if combo else 1.0) / (sizes[t.step] if sizes else 1)
            for t in targets
        ]


@dataclass(frozen=True, slots=True)
class Ordered:
    """An orderer's answer: the targets in the order to try them, and what to run when the
    request ends (given the target that answered)."""

    targets: tuple[Target, ...]
    settle: Settle | None = field(default=None)


# A strategy's orderer: None keeps the declared order.
Orderer = Callable[[OrderRequest, StateStore], Awaitable[Ordered | None]]
