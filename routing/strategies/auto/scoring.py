"""The ``auto`` combo strategy: weighted 15-factor scoring, router modes, exploration,
exclusions and budgets (pure).

**Score.** A candidate's score is ``Σ weight x factor`` over the 15 factors of
``routing.strategies.auto.factors``; the weights sum to 1, so the score is in 0..1.
:data:`DEFAULT_WEIGHTS` are the reference's. Custom weights (:func:`normalise_weights`) are laid
over the defaults and renormalised to sum 1. A mode with a pack (:data:`MODE_PACKS`) replaces
the weights wholesale:

* ``cost`` (``eco``): mostly the cost (0.5), then health, taskFit, quota;
* ``latency`` (``fast``): mostly the latency (0.45), then health, stability, taskFit;
* ``sla`` (``sla-aware``): mostly health (0.35), then stability and latency.

**Router modes** (:class:`AutoMode`) order what is left after the exclusions below; ties keep
the declared order (every sort is stable):

* ``rules`` (default), ``smart``: the rules prelude - targets known unable to take the request
  (taskFit 0: too many tools, too small a context window) go behind the others, which are
  tried first even if they score lower - then the score, descending;
* ``score``: the score alone, descending;
* ``cost``: the request's estimated cost, ascending (unknown last), then the score;
* ``latency``: p95 latency (the mean when no p95 is known) + error rate x 1000, ascending
  (no latency known: last), then the score;
* ``sla``: the targets meeting the SLA (:class:`SlaTarget`: p95 at most 5 s and at most 5 %
  errors) first, then those with no latency known yet, then those missing it; each group by
  score;
* ``lkgp``: the combo's last-known-good target first (the exact provider and connection, else
  the first target of that provider, as the ``lkgp`` strategy matches it), then the score.

**Exploration.** With probability 5 % (10 % in ``smart``) a random target other than the
first is moved to the front, so that targets the score ranks low keep being measured. One
``rng.random()`` call decides; a second picks the target. It is off in incident mode, when
more than half of the candidates' provider breakers are OPEN: then every request counts.

**Exclusions**, in this order, each never leaving the request without a candidate (availability
first: better to try a poor target than refuse; when one would, it excludes nothing):

1. the budget (``X-OmniRoute-Budget``): targets estimated above it drop out (a target of
   unknown price stays, unless the fallback is ``strict``). When none fits: ``strict`` raises
   402 ``budget_exceeded``; otherwise all stay, cheapest first, whatever the mode;
2. targets whose provider breaker is OPEN (the caller may keep them at the tail, where the
   breaker filter explains them);
3. targets under an auto exclusion that has not run out (``routing.strategies.auto.exclusion``);
4. targets scoring below the threshold (0.2) now: newly excluded; the decision's ``records``
   carry the exclusion records to store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from routing.domain.config.vocabulary import ExclusionReason
from routing.domain.plan.planning import Target
from routing.strategies.auto.exclusion import (
    ExclusionPolicy,
    ExclusionRecord,
    after_score,
    is_excluded,
)
from routing.strategies.auto.factors import (
    FACTOR_KEYS,
    AutoCandidate,
    AutoSignals,
    build_candidates,
)
from routing.strategies.auto.request import AutoMode, Budget, budget_exceeded
from routing.strategies.draws import RandomSource

__all__ = [
    "DEFAULT_WEIGHTS",
    "MODE_PACKS",
    "AutoCandidate",
    "AutoDecision",
    "AutoMode",
    "AutoSignals",
    "Excluded",
    "LastKnownGood",
    "SlaTarget",
    "auto_order",
    "build_candidates",
    "explore",
    "incident_mode",
    "mode_weights",
    "normalise_weights",
    "score",
]

Weights = Mapping[str, float]
EXPLORATION_RATE = 0.05
SMART_EXPLORATION_RATE = 0.10
INCIDENT_OPEN_SHARE = 0.5  # incident mode: more than this share of breakers OPEN
ERROR_RATE_PENALTY_MS = 1000.0  # the latency mode's price of a 100 % error rate
WEIGHT_SUM_TOLERANCE = 1e-9
LOW_SCORE = "low_score"
OVER_BUDGET = "over_budget"
CIRCUIT_OPEN = ExclusionReason.CIRCUIT_OPEN.value

_SAME = 0.0476  # the seven factors the reference weighs alike
DEFAULT_WEIGHTS: Weights = MappingProxyType(
    {
        "quota": 0.1429,
        "health": 0.1605,
        "costInv": 0.1429,
        "latencyInv": 0.1143,
        "taskFit": 0.0762,
        "stability": _SAME,
        "tierPriority": _SAME,
        "tierAffinity": _SAME,
        "specificityMatch": _SAME,
        "contextAffinity": _SAME,
        "sessionAvailability": _SAME,
        "connectionDensity": _SAME,
        "cacheAffinity": 0.0,
        "resetWindowAffinity": 0.0,
        "quality": 0.03,
    }
)


def _pack(**given: float) -> Weights:
    return MappingProxyType({key: given.get(key, 0.0) for key in FACTOR_KEYS})


MODE_PACKS: Mapping[AutoMode, Weights] = MappingProxyType(
    {
        AutoMode.COST: _pack(
            costInv=0.5, health=0.2, taskFit=0.1, quota=0.1, latencyInv=0.05, contextAffinity=0.05
        ),
        AutoMode.LATENCY: _pack(
            latencyInv=0.45, health=0.25, stability=0.1, taskFit=0.1, quota=0.05, costInv=0.05
        ),
        AutoMode.SLA: _pack(
            health=0.35, stability=0.2, latencyInv=0.2, taskFit=0.1, quota=0.1, contextAffinity=0.05
        ),
    }
)


def check_weights(weights: Weights) -> None:
    """Raise ``ValueError`` unless ``weights`` name exactly the 15 factors and sum to 1."""
    if set(weights) != set(FACTOR_KEYS):
        raise ValueError(f"weights must name exactly the factors {', '.join(FACTOR_KEYS)}")
    total = math.fsum(weights.values())
    if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
        raise ValueError(f"weights sum to {total}, not 1")


for _weights in (DEFAULT_WEIGHTS, *MODE_PACKS.values()):
    check_weights(_weights)  # at import: a mistyped weight never ships


def normalise_weights(custom: Mapping[str, float]) -> dict[str, float]:
    """Custom weights laid over :data:`DEFAULT_WEIGHTS` and renormalised to sum 1. Raises
    ``ValueError`` for an unknown factor, a negative or non-finite weight, or a zero sum."""
    unknown = set(custom) - set(FACTOR_KEYS)
    if unknown:
        raise ValueError(f"unknown auto factors: {', '.join(sorted(unknown))}")
    merged = {**DEFAULT_WEIGHTS, **custom}
    if any(not math.isfinite(w) or w < 0 for w in merged.values()):
        raise ValueError("auto weights must be finite and >= 0")
    total = math.fsum(merged.values())
    if total <= 0:
        raise ValueError("auto weights must not all be 0")
    return {key: merged[key] / total for key in FACTOR_KEYS}


def mode_weights(mode: AutoMode, custom: Mapping[str, float] | None = None) -> Weights:
    """The weights a mode scores with: its pack, else the custom weights, else the defaults."""
    pack = MODE_PACKS.get(mode)
    if pack is not None:
        return pack
    return normalise_weights(custom) if custom else DEFAULT_WEIGHTS


def score(candidate: AutoCandidate, weights: Weights) -> float:
    """``Σ weight x factor`` (in 0..1 for weights that sum to 1)."""
    factors = candidate.factors.by_key()
    return math.fsum(weights.get(key, 0.0) * value for key, value in factors.items())


@dataclass(frozen=True, slots=True)
class SlaTarget:
    """The ``sla`` mode's service level: p95 latency and error rate at most these."""

    latency_ms: float = 5000.0
    max_error_rate: float = 0.05


DEFAULT_SLA = SlaTarget()
DEFAULT_POLICY = ExclusionPolicy()  # the reference's durations; callers pass the capped ones


@dataclass(frozen=True, slots=True)
class LastKnownGood:
    """The combo's last target that answered: a provider, and its connection when known."""

    provider: str
    connection: str | None = None


@dataclass(frozen=True, slots=True)
class Excluded:
    """A target left out of the order: why, and until when for a timed exclusion."""

    target: Target
    reason: str
    until: float | None = None


@dataclass(frozen=True, slots=True)
class AutoDecision:
    """One request's order and how it came about. ``scores`` and ``records`` are keyed by
    execution key; ``records`` holds the exclusion records that changed (``None``: delete)."""

    ordered: tuple[Target, ...]
    excluded: tuple[Excluded, ...] = ()
    explored: bool = False
    scores: Mapping[str, float] = field(default_factory=dict)
    records: Mapping[str, ExclusionRecord | None] = field(default_factory=dict)
    mode: AutoMode = AutoMode.RULES
    incident: bool = False


def incident_mode(candidates: Sequence[AutoCandidate]) -> bool:
    """More than half of the candidates' provider breakers are OPEN."""
    opened = sum(1 for c in candidates if c.open)
    return bool(candidates) and opened / len(candidates) > INCIDENT_OPEN_SHARE


def latency_key(signals: AutoSignals) -> float:
    """The latency mode's key: p95 (else mean) latency + error rate x 1000; unknown: +inf."""
    latency = signals.p95_latency_ms
    if latency is None:
        latency = signals.mean_latency_ms
    if latency is None:
        return math.inf
    return latency + (signals.error_rate or 0.0) * ERROR_RATE_PENALTY_MS


def sla_group(signals: AutoSignals, sla: SlaTarget) -> int:
    """0: meets the SLA; 1: no latency known yet; 2: misses it."""
    key = latency_key(signals)
    if math.isinf(key):
        return 1
    latency = key - (signals.error_rate or 0.0) * ERROR_RATE_PENALTY_MS
    meets = latency <= sla.latency_ms and (signals.error_rate or 0.0) <= sla.max_error_rate
    return 0 if meets else 2


def lkg_index(targets: Sequence[Target], lkg: LastKnownGood | None) -> int | None:
    """The position of the last-known-good target: the exact provider and connection, else the
    first target of that provider (or whose model is ``<provider>/...``); ``None``: none."""
    if lkg is None:
        return None
    for i, t in enumerate(targets):
        if t.provider.slug == lkg.provider and str(t.connection.id) == lkg.connection:
            return i
    for i, t in enumerate(targets):
        if t.provider.slug == lkg.provider or t.model.startswith(f"{lkg.provider}/"):
            return i
    return None


def _by(
    pool: Sequence[AutoCandidate],
    scores: Mapping[str, float],
    first: Callable[[AutoCandidate], tuple[float, ...]],
) -> list[AutoCandidate]:
    return sorted(pool, key=lambda c: (*first(c), -scores[c.key]))


def _cost_key(c: AutoCandidate) -> tuple[float, ...]:
    return (c.cost_usd is None, c.cost_usd or 0.0)


def order_by_mode(
    pool: Sequence[AutoCandidate],
    scores: Mapping[str, float],
    mode: AutoMode,
    *,
    lkg: LastKnownGood | None = None,
    sla: SlaTarget = DEFAULT_SLA,
) -> list[AutoCandidate]:
    """``pool`` in the order ``mode`` tries it (see the module docstring); stable."""
    if mode is AutoMode.COST:
        return _by(pool, scores, _cost_key)
    if mode is AutoMode.LATENCY:
        return _by(pool, scores, lambda c: (latency_key(c.signals),))
    if mode is AutoMode.SLA:
        return _by(pool, scores, lambda c: (sla_group(c.signals, sla),))
    if mode in (AutoMode.RULES, AutoMode.SMART):
        return _by(pool, scores, lambda c: (c.factors.task_fit == 0,))
    ranked = _by(pool, scores, lambda c: ())
    if mode is AutoMode.LKGP:
        found = lkg_index([c.target for c in ranked], lkg)
        if found is not None:
            ranked.insert(0, ranked.pop(found))
    return ranked


def explore(
    ordered: Sequence[Target], rng: RandomSource, rate: float
) -> tuple[tuple[Target, ...], bool]:
    """With probability ``rate``, a random target other than the first moved to the front:
    one ``rng.random()`` call decides (below ``rate``: explore), one more picks the target;
    none at all with fewer than two targets or a rate of 0."""
    if len(ordered) < 2 or rate <= 0 or rng.random() >= rate:
        return tuple(ordered), False
    pick = 1 + min(int(rng.random() * (len(ordered) - 1)), len(ordered) - 2)
    rest = (t for i, t in enumerate(ordered) if i != pick)
    return (ordered[pick], *rest), True


def _keep_some(
    pool: list[AutoCandidate], out: Callable[[AutoCandidate], bool]
) -> tuple[list[AutoCandidate], list[AutoCandidate]]:
    """``pool`` split into (kept, dropped) by ``out``, unless that would keep nothing."""
    kept = [c for c in pool if not out(c)]
    if not kept:
        return pool, []
    return kept, [c for c in pool if out(c)]


def _budget(
    pool: list[AutoCandidate], budget: Budget
) -> tuple[list[AutoCandidate], list[AutoCandidate], bool]:
    """(within, over, cheapest_first); raises 402 when a strict budget fits no target."""

    def over(c: AutoCandidate) -> bool:
        return budget.strict if c.cost_usd is None else c.cost_usd > budget.max_usd

    if not pool or not all(over(c) for c in pool):
        return [c for c in pool if not over(c)], [c for c in pool if over(c)], False
    if budget.strict:
        known = [c.cost_usd for c in pool if c.cost_usd is not None]
        raise budget_exceeded(budget, min(known) if known else None)
    return pool, [], True


def _new_records(
    pool: Sequence[AutoCandidate],
    scores: Mapping[str, float],
    now: float,
    policy: ExclusionPolicy,
) -> tuple[dict[str, ExclusionRecord | None], set[str]]:
    """The records that change, and the keys newly excluded (none when that would be all)."""
    records: dict[str, ExclusionRecord | None] = {}
    newly: set[str] = set()
    for c in pool:
        before = c.signals.exclusion
        after = after_score(before, scores[c.key], c.signals.requests, now, policy)
        if after != before:
            records[c.key] = after
            if is_excluded(after, now):
                newly.add(c.key)
    if newly and all(c.key in newly for c in pool):  # never the last candidate
        records = {k: v for k, v in records.items() if k not in newly}
        newly = set()
    return records, newly


def auto_order(
    candidates: Sequence[AutoCandidate],
    weights: Mapping[str, float] | None,
    mode: AutoMode,
    rng: RandomSource,
    *,
    now: float,
    policy: ExclusionPolicy = DEFAULT_POLICY,
    budget: Budget | None = None,
    lkg: LastKnownGood | None = None,
    sla: SlaTarget = DEFAULT_SLA,
    exploration_rate: float | None = None,
) -> AutoDecision:
    """One request's order of an ``auto`` combo's candidates (see the module docstring).
    ``weights``: the combo's custom weights (``None``: the defaults); ``now``: epoch seconds,
    compared with the exclusion records; ``exploration_rate``: the combo's (``None``: the
    mode's default). Raises 402 ``budget_exceeded`` (a ``GatewayError``) for a strict budget no
    candidate fits."""
    active = mode_weights(mode, weights)
    scores = {c.key: score(c, active) for c in candidates}
    pool, excluded, cheapest_first = list(candidates), list[Excluded](), False
    if budget is not None:
        pool, over, cheapest_first = _budget(pool, budget)
        excluded += [Excluded(c.target, OVER_BUDGET) for c in over]
    pool, opened = _keep_some(pool, lambda c: c.open)
    excluded += [Excluded(c.target, CIRCUIT_OPEN) for c in opened]
    pool, waiting = _keep_some(pool, lambda c: is_excluded(c.signals.exclusion, now))
    excluded += [Excluded(c.target, LOW_SCORE, _until(c)) for c in waiting]
    records, newly = _new_records(pool, scores, now, policy)
    pool, poor = _keep_some(pool, lambda c: c.key in newly)
    excluded += [Excluded(c.target, LOW_SCORE, _until(c, records)) for c in poor]
    if cheapest_first:  # every target is above a budget that is not strict
        ranked = _by(pool, scores, _cost_key)
    else:
        ranked = order_by_mode(pool, scores, mode, lkg=lkg, sla=sla)
    incident = incident_mode(candidates)
    rate = SMART_EXPLORATION_RATE if mode is AutoMode.SMART else EXPLORATION_RATE
    if exploration_rate is not None and mode is not AutoMode.SMART:
        rate = exploration_rate
    ordered, explored = explore([c.target for c in ranked], rng, 0.0 if incident else rate)
    return AutoDecision(
        ordered,
        tuple(excluded),
        explored,
        MappingProxyType(scores),
        MappingProxyType(records),
        mode,
        incident,
    )


def _until(
    c: AutoCandidate, records: Mapping[str, ExclusionRecord | None] | None = None
) -> float | None:
    record = records.get(c.key) if records is not None else c.signals.exclusion
    return record.until if record is not None else None
