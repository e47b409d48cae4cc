"""What the proxy works out once per configuration snapshot and planned target
(docs/architecture.md, "One request").

A model's targets are planned once per snapshot (``routing.domain.plan.planning``), so the same
target objects come back request after request until the configuration changes. A
:class:`TargetMemo` keeps one value per target object, found by the object's identity (hashing
a target would hash its provider and connection on every lookup), and starts again with each
new snapshot. It holds a reference to each target it keeps, so no other object can take a kept
one's identity, and keeps at most ``bound`` of them: past that it starts again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.plan.planning import Target

V = TypeVar("V")

__all__ = ["TargetMemo"]


class TargetMemo(Generic[V]):
    """``make(target, snapshot)`` for each target, once per snapshot."""

    def __init__(self, make: Callable[[Target, ConfigSnapshot], V], bound: int = 4096) -> None:
        self._make = make
        self.bound = bound
        self._kept: tuple[ConfigSnapshot | None, dict[int, tuple[Target, V]]] = (None, {})

    def __call__(self, target: Target, snapshot: ConfigSnapshot) -> V:
        kept_for, kept = self._kept  # one read: another thread may start a new memo meanwhile
        if kept_for is not snapshot:
            kept = {}
            self._kept = (snapshot, kept)
        found = kept.get(id(target))
        if found is not None and found[0] is target:
            return found[1]
        value = self._make(target, snapshot)
        if len(kept) >= self.bound:
            kept.clear()
        kept[id(target)] = (target, value)
        return value

    def __len__(self) -> int:
        """How many values are kept for the current snapshot."""
        return len(self._kept[1])
