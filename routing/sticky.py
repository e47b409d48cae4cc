"""Weighted combos' sticky draw (reference-part2 §7.2 item 2, ``stickyWeightedLimit``): the
step drawn by weight keeps the front for that many consecutive successes, shared by every
process through the state store (``weighted-sticky:<combo>`` → ``{"step", "served"}``). A
failure of the step, or an answer from another step (the sticky one was skipped or failed),
drops it, and the next request draws again. A limit of 1 is a fresh draw per request.
"""

from __future__ import annotations

from collections.abc import Sequence

from resilience.store import Json, StateStore
from routing.attempts import AttemptContext
from routing.domain import ordering
from routing.domain.planning import Target
from routing.seams import answered_target

STICKY_TTL_SECONDS = 3600.0


def sticky_key(combo: str) -> str:
    return f"weighted-sticky:{combo}"


async def weighted(
    context: AttemptContext,
    store: StateStore,
    weights: Sequence[float],
    rng: ordering.RandomSource,
) -> tuple[Target, ...]:
    """The weighted order, with the sticky step first while it lasts."""
    plan = context.plan
    targets = plan.targets
    ordered = ordering.weighted(targets, weights, rng)
    combo = context.snapshot.combos.get(plan.combo or "")
    limit = combo.options.sticky_weighted_limit if combo is not None else 1
    if plan.combo is None or limit <= 1:
        return ordered
    key = sticky_key(plan.combo)
    record = await store.get(key)
    steps = {t.step for t in targets}
    live = _live(record, steps, limit)
    if live is not None:
        step, served = live
        ordered = tuple(t for t in ordered if t.step == step) + tuple(
            t for t in ordered if t.step != step
        )
    else:
        step, served = ordered[0].step, 0
    context.on_finish.append(lambda: _settle(context, store, key, step, served, limit))
    return ordered


def _live(record: object, steps: set[int], limit: int) -> tuple[int, int] | None:
    """The sticky (step, successes so far), while it lasts."""
    if not isinstance(record, dict):
        return None
    step, served = record.get("step"), record.get("served")
    if isinstance(step, int) and isinstance(served, int) and step in steps and served < limit:
        return step, served
    return None


async def _settle(
    context: AttemptContext, store: StateStore, key: str, step: int, served: int, limit: int
) -> None:
    answered = answered_target(context)
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
