"""The quota-share strategy's target selection (pure): share the load of a combo between its
connections in proportion to their weights, without piling requests onto a busy connection.

``select_quota_share_target`` orders one request's targets (reference-part2 §3.2):

* **bucket gating**: targets whose connection's usage bucket is saturated (the caller decides,
  from the buckets ``saturation_buckets`` names) move to a tail; all saturated: none moves;
* **concurrency gating**: among the others, a target whose connection has a positive cap and
  at least that many live in-flight requests moves behind; all at cap (or no caps): none moves;
* **DRR** (deficit round robin) over the targets with room: each call adds the quantum
  w / Σw to every one's deficit; the largest deficit (ties: the earlier target) is DRR #1 and is
  charged 1. With one target there is nothing to share: no deficit changes;
* **P2C** (power of two choices): DRR #2 is served instead of #1 when it has strictly fewer
  requests in flight;
* the winner's connection takes an in-flight slot at once; the caller releases it when the
  attempt ends. A slot it never releases stops counting after ``SLOT_TTL_SECONDS``.

``QuotaShareState`` is the process's memory of both: the deficits per combo (the 200 most
recently used combos) and the slots per connection. It is not thread-safe: one event loop.

Times are seconds of a monotonic clock, passed in.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import count

from routing.domain.planning import Target

SLOT_TTL_SECONDS = 600.0  # a slot never released stops counting after this long
MAX_COMBOS = 200  # combos whose deficits are remembered; the least recently used is forgotten


def execution_key(target: Target) -> str:
    """The key of ``target``'s deficit within its combo: ``<connection id>:<model>``."""
    return f"{target.connection.id}:{target.model}"


def saturation_buckets(model: str) -> tuple[str, str, str]:
    """The usage buckets that saturate a connection for ``model``: ``5h``, ``7d`` and
    ``7d:<bare model>`` (the part after the first ``/``, or the whole name without one)."""
    bare = model.partition("/")[2] or model
    return "5h", "7d", f"7d:{bare}"


class Slot:
    """One request in flight on a connection, counted from ``acquire`` until ``release`` or
    ``expires_at``, whichever comes first."""

    __slots__ = ("_state", "_token", "connection_id", "expires_at")

    def __init__(
        self, state: QuotaShareState, connection_id: int, token: int, expires_at: float
    ) -> None:
        self._state = state
        self._token = token
        self.connection_id = connection_id
        self.expires_at = expires_at

    def release(self) -> None:
        """Stop counting this request. Idempotent: a second call (or one after the slot
        expired) changes nothing, so the count never drops below the live requests."""
        self._state._release(self.connection_id, self._token)


class QuotaShareState:
    """The DRR deficits per combo and the in-flight slots per connection of one process."""

    __slots__ = ("_deficits", "_max_combos", "_slot_ttl", "_slots", "_tokens")

    def __init__(self, slot_ttl: float = SLOT_TTL_SECONDS, max_combos: int = MAX_COMBOS) -> None:
        self._slot_ttl = slot_ttl
        self._max_combos = max_combos
        self._deficits: OrderedDict[str, dict[str, float]] = OrderedDict()  # oldest use first
        self._slots: dict[int, dict[int, float]] = {}  # connection id -> token -> expiry
        self._tokens = count()

    def acquire(self, connection_id: int, now: float) -> Slot:
        """Count one more request in flight on ``connection_id`` from ``now``."""
        token = next(self._tokens)
        expires_at = now + self._slot_ttl
        self._slots.setdefault(connection_id, {})[token] = expires_at
        return Slot(self, connection_id, token, expires_at)

    def in_flight(self, connection_id: int, now: float) -> int:
        """The live requests on ``connection_id``: acquired, not released, not expired."""
        slots = self._slots.get(connection_id)
        if not slots:
            return 0
        expired = [token for token, expires_at in slots.items() if expires_at <= now]
        for token in expired:
            del slots[token]
        if not slots:
            del self._slots[connection_id]
        return len(slots)

    def deficits(self, combo: str) -> dict[str, float]:
        """A copy of ``combo``'s deficits by execution key ({} if forgotten or never used);
        reading them is not a use."""
        return dict(self._deficits.get(combo, {}))

    def _release(self, connection_id: int, token: int) -> None:
        slots = self._slots.get(connection_id)
        if slots is not None and slots.pop(token, None) is not None and not slots:
            del self._slots[connection_id]

    def _combo_deficits(self, combo: str) -> dict[str, float]:
        """``combo``'s deficits, marked as the most recently used (the oldest is forgotten)."""
        deficits = self._deficits.get(combo)
        if deficits is None:
            deficits = self._deficits[combo] = {}
            while len(self._deficits) > self._max_combos:
                self._deficits.popitem(last=False)
        else:
            self._deficits.move_to_end(combo)
        return deficits
