"""The quota-share strategy's target selection (pure): share the load of a combo between its
connections in proportion to their weights, without piling requests onto a busy connection.

``select_quota_share_target`` orders one request's targets:

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

import math
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import count

from routing.domain.plan.planning import Target
from routing.strategies.keys import execution_key

SLOT_TTL_SECONDS = 600.0  # a slot never released stops counting after this long
MAX_COMBOS = 200  # combos whose deficits are remembered; the least recently used is forgotten


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


@dataclass(frozen=True, slots=True)
class Selection:
    """One request's choice: the target to try first (None: no targets), every target in the
    order to try them, and the winner's in-flight slot, to release when the attempt ends."""

    target: Target | None
    ordered: tuple[Target, ...]
    slot: Slot | None


def select_quota_share_target(
    targets: Sequence[Target],
    *,
    combo: str,
    model: str,
    now: float,
    state: QuotaShareState,
    weights: Sequence[float] | None = None,
    saturated: Collection[int] = frozenset(),
    caps: Mapping[int, int | None] | None = None,
) -> Selection:
    """Choose the target for one request of ``combo`` and take its connection's slot.

    ``weights`` are aligned with ``targets`` (a combo step's weight; missing, non-finite or
    ≤ 0: 1). ``saturated`` holds the connection ids with a saturated bucket for ``model`` (see
    ``saturation_buckets``). A connection's cap is ``caps[id]`` when the key is present (even
    None), else its ``max_concurrent``; None or ≤ 0: no cap. ``ordered`` is the winner, the
    other targets with room, those at cap, then the saturated ones (each group in input order).
    """
    if weights is not None and len(weights) != len(targets):
        raise ValueError(f"{len(weights)} weights for {len(targets)} targets")
    if not targets:
        return Selection(None, (), None)
    indexed = list(enumerate(targets))
    eligible = [item for item in indexed if item[1].connection.id not in saturated]
    tail = [item for item in indexed if item[1].connection.id in saturated]
    if not eligible:  # all saturated: fail open
        eligible, tail = indexed, []
    loads = {t.connection.id: state.in_flight(t.connection.id, now) for _, t in eligible}
    room = [item for item in eligible if not _at_cap(item[1], loads, caps)]
    at_cap = [item for item in eligible if _at_cap(item[1], loads, caps)]
    if not room:  # all at cap: fail open
        room, at_cap = eligible, []
    index, winner = room[0] if len(room) == 1 else _share(room, combo, state, weights, loads)
    ordered = (
        winner,
        *(t for i, t in room if i != index),
        *(t for _, t in at_cap),
        *(t for _, t in tail),
    )
    return Selection(winner, ordered, state.acquire(winner.connection.id, now))


def _at_cap(
    target: Target, loads: Mapping[int, int], caps: Mapping[int, int | None] | None
) -> bool:
    connection = target.connection
    given = caps is not None and connection.id in caps
    cap = caps[connection.id] if caps is not None and given else connection.max_concurrent
    return cap is not None and cap > 0 and loads[connection.id] >= cap


def _weight(weights: Sequence[float] | None, index: int) -> float:
    weight = 1.0 if weights is None else float(weights[index])
    return weight if math.isfinite(weight) and weight > 0 else 1.0


def _share(
    room: list[tuple[int, Target]],
    combo: str,
    state: QuotaShareState,
    weights: Sequence[float] | None,
    loads: Mapping[int, int],
) -> tuple[int, Target]:
    """DRR then P2C over two or more targets with room: the (input index, target) to serve."""
    deficits = state._combo_deficits(combo)
    shares = [_weight(weights, index) for index, _ in room]
    total = sum(shares)
    for (_, target), share in zip(room, shares, strict=True):
        key = execution_key(target)
        deficits[key] = deficits.get(key, 0.0) + share / total
    # Stable sort: equal deficits keep input order, so the earlier target ranks first.
    first, second = sorted(room, key=lambda item: -deficits[execution_key(item[1])])[:2]
    deficits[execution_key(first[1])] -= 1.0  # DRR #1 is charged, whichever P2C serves
    if loads[second[1].connection.id] < loads[first[1].connection.id]:
        return second
    return first
