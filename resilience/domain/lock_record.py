"""A connection's lock record as the state store keeps it (pure): its active locks and the
failure states that escalate them, by model slot, with the codec, the pruning of expired
entries and the questions the attempt loop asks of it (docs/resilience.md, "Pair locks")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from resilience.domain.lockout import FailureState, Lock, LockScope, model_slot, model_slots

if TYPE_CHECKING:
    from omniroute.core.store.base import Json

EVICTION_CAP = 1000  # failure states per connection: a soft cap, never an active lock's


@dataclass(slots=True)
class LockRecord:
    """A connection's locks and failure states, by model slot."""

    locks: dict[str, Lock] = field(default_factory=dict)
    failures: dict[str, FailureState] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether the record holds no lock and no failure state (most connections, most of
        the time)."""
        return not self.locks and not self.failures

    @classmethod
    def decode(cls, raw: Json | None) -> LockRecord:
        if not isinstance(raw, dict):
            return cls()
        locks, fails = raw.get("locks"), raw.get("fails")
        return cls(
            {k: Lock.from_dict(v) for k, v in (locks or {}).items() if isinstance(v, dict)}
            if isinstance(locks, dict)
            else {},
            {k: FailureState.from_dict(v) for k, v in (fails or {}).items() if isinstance(v, dict)}
            if isinstance(fails, dict)
            else {},
        )

    def pruned(self, now: float) -> LockRecord:
        """Without expired locks and stale failure states, within the soft eviction cap."""
        locks = {k: lock for k, lock in self.locks.items() if lock.until > now}
        fails = {
            k: state
            for k, state in self.failures.items()
            if k in locks or now - state.last_failure_at <= state.window + state.last_cooldown
        }
        return LockRecord(locks, _evicted(fails, keep=set(locks)))

    def encode(self) -> dict[str, Any] | None:
        if not self.locks and not self.failures:
            return None
        return {
            "locks": {k: lock.to_dict() for k, lock in self.locks.items()},
            "fails": {k: state.to_dict() for k, state in self.failures.items()},
        }

    def lock_ends(self) -> dict[str, float]:
        return {slot: lock.until for slot, lock in self.locks.items()}

    def concerns(self, model: str) -> bool:
        """Whether the record holds a lock or a failure state of ``model``."""
        if not self.locks and not self.failures:  # most records: no slot to build
            return False
        return any(s in self.failures or s in self.locks for s in model_slots(model))

    def awaiting_probe(self, model: str, threshold: int) -> float | None:
        """A pair whose run of transient failures locked it and whose lock has ended: the
        next request is its probe. Returns the run's generation (its last
        failure time), or ``None``. The caller has checked that no lock holds it."""
        if not self.locked_in_run(model, threshold):
            return None
        return self.failures[model_slot(model, LockScope.EXACT)].last_failure_at

    def locked_in_run(self, model: str, threshold: int) -> bool:
        """Whether the pair's current run of transient failures has locked it: an attempt
        let through now (the probe after the lock, or a panic attempt through it) is the
        pair's probe."""
        state = self.failures.get(model_slot(model, LockScope.EXACT))
        return state is not None and state.consecutive >= threshold

    def awaiting_hinted_probe(self, model: str) -> float | None:
        """A pair whose upstream-hinted lock has ended with no success since: the next
        request is its probe, the others wait for its answer. Returns the lock's start (its
        generation), or ``None``."""
        state = self.failures.get(model_slot(model, LockScope.EXACT))
        return state.hinted_lock_at if state is not None and state.hinted_lock_at else None

    def lock_for(self, model: str, now: float) -> Lock | None:
        """The live lock with the latest end among the model's slots."""
        live = [self.locks[s] for s in model_slots(model) if s in self.locks]
        live = [lock for lock in live if lock.until > now]
        return max(live, key=lambda lock: lock.until, default=None)


def _evicted(failures: dict[str, FailureState], keep: set[str]) -> dict[str, FailureState]:
    """A soft cap: over ``EVICTION_CAP`` entries, drop the oldest failure states,
    never one whose lock is still active."""
    excess = len(failures) - EVICTION_CAP
    if excess <= 0:
        return failures
    idle = sorted((s.last_failure_at, k) for k, s in failures.items() if k not in keep)
    doomed = {k for _, k in idle[:excess]}
    return {k: s for k, s in failures.items() if k not in doomed}
