"""The ``auto`` strategy's 15 factors: what the gateway knows of each target, normalised to
0..1 where higher is better (pure).

:class:`AutoSignals` holds the raw inputs of one target (``None``: unknown);
:func:`build_candidates` turns a pool of them and the request (:class:`RequestProfile`) into
:class:`AutoCandidate` values. Unknown inputs give the neutral :data:`UNKNOWN` (0.5) unless a
factor says otherwise. How each factor is computed:

* **quota**: the share of the connection's quota left, ``1 - percent_used``;
* **health**: the success rate with one success and one failure assumed up front
  (``(ok + 1) / (requests + 2)``: 0.5 with no data, so one early failure does not sink a
  target), halved while the provider's breaker is HALF_OPEN. An OPEN breaker excludes the
  target from the ordering (``routing.strategies.auto.scoring``); its health is 0;
* **costInv**: the cheapest estimated request cost of the pool over this target's,
  ``(cheapest + 1e-6) / (cost + 1e-6)`` (a millionth of a dollar keeps free models finite):
  1 for the cheapest;
* **latencyInv**: the fastest mean latency of the pool over this target's: 1 for the fastest;
* **taskFit**: 0 when the target is known unable to take the request (more tools than its
  learnt tool limit, or more tokens than its context window), else 1;
* **stability**: the breaker's state (CLOSED 1, DEGRADED 0.5, HALF_OPEN 0.25, OPEN 0) times the
  latency's steadiness when the p95 latency is known: ``2 x mean / p95``, at most 1 (a p95 up
  to twice the mean is an ordinary tail; four times the mean halves it);
* **tierPriority**: the declared position of the target's combo step, first 1, last 0;
* **tierAffinity**: how the model's price tier (its cost's rank in the pool, cheapest 0,
  dearest 1) matches the request's weight (its input over 32k tokens, at least 0.5 with
  tools): ``1 - |weight - tier|``: light requests to cheap models, heavy ones to dear ones;
* **specificityMatch**: 1 when the combo step names this very connection, 0.5 when the step
  names a provider's model and the gateway expanded it to this connection;
* **contextAffinity**: the context window's room for the request: 1 while the request needs
  at most half the window, falling to 0.25 when it fills it, 0 past it;
* **sessionAvailability**: the free share of the connection's concurrency cap,
  ``1 - in_flight / cap`` (1 without a cap);
* **connectionDensity**: how many connections of the pool serve this provider's model, over
  the most any model of the pool has: a model behind several accounts absorbs load;
* **cacheAffinity**: 1 when the target's connection likely holds a warm prompt cache (the
  last known good connection of the combo), 0 when another one does;
* **resetWindowAffinity**: the urgency of the quota's reset, ``1 - seconds_to_reset / 7 days``
  (a quota about to reset is worth using up);
* **quality**: the model's quality score 0..1 when one is known (the catalog has none yet).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields

from resilience.domain.breaker.state import BreakerState
from routing.domain.plan.planning import Target
from routing.strategies.auto.exclusion import ExclusionRecord
from routing.strategies.auto.request import RequestProfile, estimate_cost
from routing.strategies.keys import execution_key

UNKNOWN = 0.5
COST_FLOOR_USD = 1e-6
LATENCY_FLOOR_MS = 1.0
ORDINARY_TAIL = 2.0  # a p95 latency up to this many times the mean costs no stability
HEAVY_REQUEST_TOKENS = 32_000  # a request this large (input) weighs 1 for tierAffinity
TOOLS_WEIGHT = 0.5  # the least weight of a request that declares tools
CONTEXT_COMFORT = 0.5  # contextAffinity is 1 up to this share of the window
CONTEXT_FULL_AFFINITY = 0.25  # and this when the request fills it
RESET_HORIZON_SECONDS = 7 * 24 * 3600.0  # the weekly window
PINNED_SPECIFICITY, EXPANDED_SPECIFICITY = 1.0, 0.5
BREAKER_STABILITY: dict[str, float] = {
    BreakerState.CLOSED: 1.0,
    BreakerState.DEGRADED: 0.5,
    BreakerState.HALF_OPEN: 0.25,
    BreakerState.OPEN: 0.0,
}


@dataclass(frozen=True, slots=True)
class AutoSignals:
    """The raw inputs about one target (``None``: unknown)."""

    target: Target
    steps: int = 1  # how many steps the combo declares (the target's is ``target.step``)
    pinned: bool = False  # the step names this connection
    requests: int = 0  # the combo's requests to this target so far
    successes: int = 0
    mean_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    breaker: str = BreakerState.CLOSED
    quota_used: float | None = None  # fraction 0..1 of the connection's quota used
    quota_reset_in_seconds: float | None = None
    input_price: float | None = None  # USD per million tokens
    output_price: float | None = None
    context_window: int | None = None
    tool_limit: int | None = None  # the most tools the target was seen to take
    in_flight: int | None = None  # requests on the connection now
    max_concurrent: int | None = None  # the connection's cap
    cache_warm: bool | None = None
    quality: float | None = None
    exclusion: ExclusionRecord | None = None  # its auto exclusion, if any

    @property
    def error_rate(self) -> float | None:
        """The failed share of its requests (``None`` before any)."""
        return 1 - self.successes / self.requests if self.requests > 0 else None


@dataclass(frozen=True, slots=True)
class Factors:
    """A target's 15 normalised factors, each in 0..1 (higher is better)."""

    quota: float = UNKNOWN
    health: float = UNKNOWN
    cost_inv: float = UNKNOWN
    latency_inv: float = UNKNOWN
    task_fit: float = 1.0
    stability: float = 1.0
    tier_priority: float = 1.0
    tier_affinity: float = UNKNOWN
    specificity_match: float = EXPANDED_SPECIFICITY
    context_affinity: float = UNKNOWN
    session_availability: float = 1.0
    connection_density: float = 1.0
    cache_affinity: float = UNKNOWN
    reset_window_affinity: float = UNKNOWN
    quality: float = UNKNOWN

    def by_key(self) -> dict[str, float]:
        """The factors by their weight keys (``costInv``, ``latencyInv``, ...)."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


FACTOR_KEYS: tuple[str, ...] = tuple(Factors().by_key())


@dataclass(frozen=True, slots=True)
class AutoCandidate:
    """A target with its factors, its raw signals and the request's estimated cost there."""

    target: Target
    factors: Factors
    signals: AutoSignals
    cost_usd: float | None = None

    @property
    def key(self) -> str:
        return execution_key(self.target)

    @property
    def open(self) -> bool:
        """Whether its provider's breaker is OPEN."""
        return self.signals.breaker == BreakerState.OPEN


def clamp01(value: float) -> float:
    return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))


def quota_factor(used: float | None) -> float:
    return UNKNOWN if used is None else clamp01(1 - used)


def health_factor(requests: int, successes: int, breaker: str) -> float:
    if breaker == BreakerState.OPEN:
        return 0.0
    rate = (min(successes, requests) + 1) / (max(requests, 0) + 2)
    return rate / 2 if breaker == BreakerState.HALF_OPEN else rate


def ratio_factor(value: float | None, best: float | None, floor: float) -> float:
    """``(best + floor) / (value + floor)`` for costInv and latencyInv (lower raw is better)."""
    if value is None or best is None:
        return UNKNOWN
    return clamp01((max(best, 0) + floor) / (max(value, 0) + floor))


def task_fit_factor(request: RequestProfile, window: int | None, tool_limit: int | None) -> float:
    if tool_limit is not None and request.tools > tool_limit:
        return 0.0
    if window is not None and request.needed_tokens > window:
        return 0.0
    return 1.0


def stability_factor(breaker: str, mean_ms: float | None, p95_ms: float | None) -> float:
    steady = 1.0
    if mean_ms is not None and p95_ms is not None and p95_ms > 0:
        steady = clamp01(ORDINARY_TAIL * mean_ms / p95_ms)
    return BREAKER_STABILITY.get(breaker, 1.0) * steady


def tier_priority_factor(step: int, steps: int) -> float:
    return 1.0 if steps <= 1 else clamp01(1 - step / (steps - 1))


def request_weight(request: RequestProfile) -> float:
    weight = clamp01(request.input_tokens / HEAVY_REQUEST_TOKENS)
    return max(weight, TOOLS_WEIGHT) if request.tools else weight


def tier_affinity_factor(weight: float, tier: float | None) -> float:
    return UNKNOWN if tier is None else clamp01(1 - abs(weight - tier))


def specificity_factor(pinned: bool) -> float:
    return PINNED_SPECIFICITY if pinned else EXPANDED_SPECIFICITY


def context_affinity_factor(needed: int, window: int | None) -> float:
    if window is None or window <= 0:
        return UNKNOWN
    share = needed / window
    if share > 1:
        return 0.0
    if share <= CONTEXT_COMFORT:
        return 1.0
    fall = (1 - CONTEXT_FULL_AFFINITY) * (share - CONTEXT_COMFORT) / (1 - CONTEXT_COMFORT)
    return 1 - fall


def session_availability_factor(in_flight: int | None, cap: int | None) -> float:
    if cap is None or cap <= 0 or in_flight is None:
        return 1.0
    return clamp01(1 - in_flight / cap)


def density_factor(count: int, most: int) -> float:
    return 1.0 if most <= 0 else clamp01(count / most)


def cache_factor(warm: bool | None) -> float:
    return UNKNOWN if warm is None else float(warm)


def reset_window_factor(reset_in_seconds: float | None) -> float:
    if reset_in_seconds is None:
        return UNKNOWN
    return clamp01(1 - reset_in_seconds / RESET_HORIZON_SECONDS)


def quality_factor(quality: float | None) -> float:
    return UNKNOWN if quality is None or math.isnan(quality) else clamp01(quality)


def _tiers(costs: Sequence[float | None]) -> list[float | None]:
    """Each cost's rank among the pool's distinct known costs, cheapest 0, dearest 1 (one
    distinct cost: the middle)."""
    distinct = sorted({c for c in costs if c is not None})
    span = len(distinct) - 1
    return [None if c is None else (distinct.index(c) / span if span else UNKNOWN) for c in costs]


def build_candidates(
    pool: Sequence[AutoSignals], request: RequestProfile
) -> tuple[AutoCandidate, ...]:
    """The candidates of one request: each target's factors, some relative to the pool (the
    cheapest, the fastest, the price tiers, the connection density)."""
    costs = [estimate_cost(request, s.input_price, s.output_price) for s in pool]
    known_costs = [c for c in costs if c is not None]
    cheapest = min(known_costs) if known_costs else None
    latencies = [s.mean_latency_ms for s in pool if s.mean_latency_ms is not None]
    fastest = min(latencies) if latencies else None
    density = Counter((s.target.provider.slug, s.target.model) for s in pool)
    most = max(density.values(), default=0)
    weight = request_weight(request)
    candidates = []
    for signals, cost, tier in zip(pool, costs, _tiers(costs), strict=True):
        t = signals.target
        factors = Factors(
            quota=quota_factor(signals.quota_used),
            health=health_factor(signals.requests, signals.successes, signals.breaker),
            cost_inv=ratio_factor(cost, cheapest, COST_FLOOR_USD),
            latency_inv=ratio_factor(signals.mean_latency_ms, fastest, LATENCY_FLOOR_MS),
            task_fit=task_fit_factor(request, signals.context_window, signals.tool_limit),
            stability=stability_factor(
                signals.breaker, signals.mean_latency_ms, signals.p95_latency_ms
            ),
            tier_priority=tier_priority_factor(t.step, signals.steps),
            tier_affinity=tier_affinity_factor(weight, tier),
            specificity_match=specificity_factor(signals.pinned),
            context_affinity=context_affinity_factor(request.needed_tokens, signals.context_window),
            session_availability=session_availability_factor(
                signals.in_flight, signals.max_concurrent
            ),
            connection_density=density_factor(density[(t.provider.slug, t.model)], most),
            cache_affinity=cache_factor(signals.cache_warm),
            reset_window_affinity=reset_window_factor(signals.quota_reset_in_seconds),
            quality=quality_factor(signals.quality),
        )
        candidates.append(AutoCandidate(t, factors, signals, cost))
    return tuple(candidates)
