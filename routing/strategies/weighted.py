"""The ``weighted`` strategy: one step drawn by its weight first, the rest by descending
weight, and the drawn step kept in front for ``stickyWeightedLimit`` successes.

The sticky draw is shared by every process through the state store
(``weighted-sticky:<combo>`` → ``{"step", "served"}``). A failure of the step, or an answer
from another step (the sticky one was skipped or failed), drops it, and the next request
draws again. A limit of 1 is a fresh draw per request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omniroute.core.store import Json, StateStore
from routing.domain.plan.planning import Target
from routing.strategies import sources
from routing.strategies.draws import RandomSource, random_index
from routing.strategies.request import Ordered, OrderRequest

STICKY_TTL_SECONDS = 3600.0
_HUGE_WEIGHT = 1e300  # weighted: above this, weights are scaled before they are summed


def _clean_weight(weight: float | None) -> float:
    """A usable weight: missing (``None``), non-finite or negative counts as 0."""
    if weight is None or not math.isfinite(weight) or weight < 0:
        return 0.0
    return float(weight)


def weighted(
    targets: Sequence[Target], weights: Sequence[float | None], rng: RandomSource
) -> tuple[Target, ...]:
    """Weighted: draw one target with probability weight / Σweight, put it first, and the
    rest after it by descending weight (ties: declared order).

    ``weights[i]`` is the weight of ``targets[i]`` (its combo step's weight; the targets of
    one step share it, and each target is its own entry in the draw, so a step with two
    connections is twice as likely as its weight alone says - pass ``weight / connections``
    to draw per step). A weight that is missing (``None``), 0, negative or non-finite is
    never drawn while any weight is positive; when none is, the draw is uniform. One
    ``rng.random()`` call. Raises ``ValueError`` when the lengths differ.
    """
    if len(weights) != len(targets):
        raise ValueError(f"{len(weights)} weights for {len(targets)} targets")
    if not targets:
        return ()
    clean = [_clean_weight(w) for w in weights]
    top = max(clean)
    if top > _HUGE_WEIGHT:  # two weights near 1e308 would overflow the sum: scale them to <= 1
        clean = [w / top for w in clean]
    total = math.fsum(clean)
    if total > 0:
        point = rng.random() * total
        drawn = max(i for i, w in enumerate(clean) if w > 0)  # if rounding passes the end
        cumulative = 0.0
        for i, w in enumerate(clean):
            cumulative += w
            if w > 0 and point < cumulative:
                drawn = i
                break
    else:
        drawn = random_index(rng, len(targets))
    rest = sorted((i for i in range(len(targets)) if i != drawn), key=lambda i: -clean[i])
    return (targets[drawn], *(targets[i] for i in rest))


def sticky_key(combo: str) -> str:
    return f"weighted-sticky:{combo}"


async def order_weighted(request: OrderRequest, store: StateStore) -> Ordered:
    """The weighted order (one draw per step, whatever its connections), with the sticky step
    first while it lasts; what to settle keeps or drops it once the request ends."""
    plan = request.plan
    ordered = weighted(plan.targets, request.weights(per_step=True), sources.rng)
    combo = request.combo
    limit = combo.options.sticky_weighted_limit if combo is not None else 1
    if plan.combo is None or limit <= 1:
        return Ordered(ordered)
    key = sticky_key(plan.combo)
    live = _live(await store.get(key), {t.step for t in plan.targets}, limit)
    if live is not None:
        step, served = live
        ordered = tuple(t for t in ordered if t.step == step) + tuple(
            t for t in ordered if t.step != step
        )
    else:
        step, served = ordered[0].step, 0
    return Ordered(ordered, lambda answered: _settle(answered, store, key, step, served, limit))


def _live(record: object, steps: set[int], limit: int) -> tuple[int, int] | None:
    """The sticky (step, successes so far), while it lasts."""
    if not isinstance(record, dict):
        return None
    step, served = record.get("step"), record.get("served")
    if isinstance(step, int) and isinstance(served, int) and step in steps and served < limit:
        return step, served
    return None


async def _settle(
    answered: Target | None, store: StateStore, key: str, step: int, served: int, limit: int
) -> None:
    if answered is None or answered.step != step:
        await store.delete(key)  # the sticky step failed, or was passed over: draw anew
        return

    def one_more(current: Json | None) -> Json | None:
        """Counted atomically: requests that ran at once each count one success."""
        record = current if isinstance(current, dict) else {}
        done = record.get("served") if record.get("step") == step else None
        total = (done if isinstance(done, int) else served) + 1
        return {"step": step, "served": total} if total < limit else None

    await store.update(key, one_more, ttl=STICKY_TTL_SECONDS)
