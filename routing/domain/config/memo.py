"""Values worked out from one configuration snapshot, kept until the snapshot changes (pure).

The snapshot is immutable and replaced whole when the configuration changes, so anything derived
from it and a key (a model's plan, a target's gate caps) can be worked out once and looked up
after. A :class:`SnapshotMemo` holds one snapshot's values: a new snapshot starts it again, and so
does reaching ``bound`` values (a key may come from a client: a model's name). The snapshot and
its values are read together in one step, so another thread starting a new memo meanwhile
cannot hand one snapshot's values to another.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from routing.domain.config.snapshot import ConfigSnapshot

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

__all__ = ["SnapshotMemo"]


class SnapshotMemo(Generic[K, V]):
    """One snapshot's values by key, at most ``bound`` of them."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._kept: tuple[ConfigSnapshot | None, dict[K, V]] = (None, {})

    def of(self, snapshot: ConfigSnapshot) -> dict[K, V]:
        """``snapshot``'s values (empty when it is not the one they were kept for): look up in
        it, and add to it with :meth:`keep`."""
        kept_for, kept = self._kept  # one read: the snapshot and its values together
        if kept_for is not snapshot:
            kept = {}
            self._kept = (snapshot, kept)
        return kept

    def keep(self, kept: dict[K, V], key: K, value: V) -> V:
        """``value`` kept under ``key`` in ``kept`` (from :meth:`of`), which starts again when
        full; returns ``value``."""
        if len(kept) >= self.bound:
            kept.clear()
        kept[key] = value
        return value

    def __len__(self) -> int:
        """How many values are kept now."""
        return len(self._kept[1])
