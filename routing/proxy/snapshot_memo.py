"""What the proxy works out once per configuration snapshot and planned target
(docs/architecture.md, "One request").

A model's targets are planned once per snapshot (``routing.domain.plan.planning``), so the same
target objects come back request after request until the configuration changes. A
:class:`TargetMemo` keeps one value per target object in a
:class:`~routing.domain.config.memo.SnapshotMemo`, found by the object's identity (hashing a
target would hash its provider and connection on every lookup). It holds a reference to each
target it keeps, so no other object can take a kept one's identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from routing.domain.config.memo import SnapshotMemo
from routing.domain.config.snapshot import ConfigSnapshot
from routing.domain.plan.planning import Target

V = TypeVar("V")

__all__ = ["TargetMemo"]


class TargetMemo(Generic[V]):
    """``make(target, snapshot)`` for each target, once per snapshot (at most ``bound``)."""

    def __init__(self, make: Callable[[Target, ConfigSnapshot], V], bound: int = 4096) -> None:
        self._make = make
        self._memo: SnapshotMemo[int, tuple[Target, V]] = SnapshotMemo(bound)

    @property
    def bound(self) -> int:
        return self._memo.bound

    def __call__(self, target: Target, snapshot: ConfigSnapshot) -> V:
        kept = self._memo.of(snapshot)
        found = kept.get(id(target))
        if found is not None and found[0] is target:
            return found[1]
        value = self._make(target, snapshot)
        self._memo.keep(kept, id(target), (target, value))
        return value

    def __len__(self) -> int:
        """How many values are kept now."""
        return len(self._memo)
