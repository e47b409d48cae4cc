"""The orderings of the strategies that read the combo's per-target metrics (pure):

* ``least_used`` - least-used: ascending request count per execution key;
* ``p2c`` - p2c: the better of two random picks first, then the other pick;
* ``last_known_good`` - lkgp: the last target that served the combo first.

Each takes one request's targets and returns them as a new tuple, a permutation; what the
strategy remembers (counts, success rates, latencies, the last good target) is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from resilience.domain.breaker.state import BreakerState
from routing.domain.plan.planning import Target
from routing.strategies.draws import RandomSource, random_index
from routing.strategies.keys import execution_key

UNKNOWN_SUCCESS_SCORE = 0.5  # p2c: successRate / 100 when the success rate is unknown
UNKNOWN_LATENCY_SCORE = 0.25  # p2c: the latency term when the latency is unknown or <= 0
HALF_OPEN_PENALTY = 0.25  # p2c: subtracted from a target whose breaker is HALF_OPEN
P2C_TIE_BAND = 0.02  # p2c: scores this close are a tie (about 2 points of success rate)
P2C_LATENCY_TIE_MS = 100.0  # p2c: latencies this close are a tie (network and machine noise)
P2C_LATENCY_TIE_SHARE = 0.5  # p2c: and so are latencies within 50 % of each other
P2C_MIN_SAMPLES = 5  # p2c: a target with fewer requests is not judged by its metrics yet
P2C_STALE_SECONDS = 60.0  # p2c: nor one whose last request is older (it may have recovered)


def least_used(targets: Sequence[Target], counts: Mapping[str, float]) -> tuple[Target, ...]:
    """Least-used: ascending by ``counts[execution_key(target)]`` (unknown = 0); stable."""
    return tuple(sorted(targets, key=lambda t: counts.get(execution_key(t), 0)))


@dataclass(frozen=True, slots=True)
class TargetMetrics:
    """What p2c knows of one execution key: success rate in percent (0-100), average latency
    in milliseconds (``None``: unknown) and its breaker state (a ``BreakerState`` value)."""

    success_rate: float | None
    avg_latency_ms: float | None
    breaker: str = BreakerState.CLOSED
    count: int = 0  # requests it served for the combo
    age_seconds: float | None = None  # since its last request (None: unknown)


def p2c_score(metrics: TargetMetrics | None) -> float:
    """A target's p2c score: -inf when its breaker is OPEN; else successRate / 100 (0.5 when
    unknown) + 1 / log10(avgLatencyMs + 10) (0.25 when unknown or <= 0), minus 0.25 when the
    breaker is HALF_OPEN. No metrics at all scores 0.5 + 0.25."""
    if metrics is None:
        return UNKNOWN_SUCCESS_SCORE + UNKNOWN_LATENCY_SCORE
    if metrics.breaker == BreakerState.OPEN:
        return -math.inf
    rate = metrics.success_rate
    score = UNKNOWN_SUCCESS_SCORE if rate is None or not math.isfinite(rate) else rate / 100
    latency = metrics.avg_latency_ms
    if latency is None or not math.isfinite(latency) or latency <= 0:
        score += UNKNOWN_LATENCY_SCORE
    else:
        score += 1 / math.log10(latency + 10)
    if metrics.breaker == BreakerState.HALF_OPEN:
        score -= HALF_OPEN_PENALTY
    return score


def p2c_comparable(a: TargetMetrics | None, b: TargetMetrics | None) -> bool:
    """Whether two targets are a p2c tie: scores within :data:`P2C_TIE_BAND`; one not measured
    yet (fewer than :data:`P2C_MIN_SAMPLES` requests, or none for :data:`P2C_STALE_SECONDS`:
    it must be tried to be known) and
    neither breaker OPEN; or the same
    breaker state and success rates within 2 points with latencies within
    :data:`P2C_LATENCY_TIE_MS` or 50 % of each other (the latency term of the score is steep
    at a few milliseconds, where such differences are noise, and a passing spike must not
    starve a target)."""
    if abs(p2c_score(a) - p2c_score(b)) <= P2C_TIE_BAND:
        return True
    if _unmeasured(a) or _unmeasured(b):  # nothing known yet: its turn comes by its count
        return not _open(a) and not _open(b)
    assert a is not None and b is not None
    if a.breaker != b.breaker or a.breaker == BreakerState.OPEN:
        return False
    rates = (a.success_rate, b.success_rate)
    if None in rates or abs((rates[0] or 0) - (rates[1] or 0)) > 100 * P2C_TIE_BAND:
        return rates == (None, None) and _latency_tie(a, b)
    return _latency_tie(a, b)


def _unmeasured(metrics: TargetMetrics | None) -> bool:
    """Too few requests to judge it by (a first call pays for a cold connection), or none for
    a while: a target that lost every pair would otherwise never be measured again."""
    if metrics is None or (metrics.success_rate is None and metrics.avg_latency_ms is None):
        return True
    stale = metrics.age_seconds is not None and metrics.age_seconds > P2C_STALE_SECONDS
    return stale or 0 < metrics.count < P2C_MIN_SAMPLES


def _open(metrics: TargetMetrics | None) -> bool:
    return metrics is not None and metrics.breaker == BreakerState.OPEN


def _latency_tie(a: TargetMetrics, b: TargetMetrics) -> bool:
    la, lb = a.avg_latency_ms, b.avg_latency_ms
    if la is None or lb is None:
        return la is None and lb is None
    return abs(la - lb) <= max(P2C_LATENCY_TIE_MS, P2C_LATENCY_TIE_SHARE * min(la, lb))


def p2c(
    targets: Sequence[Target], rng: RandomSource, metrics: Mapping[str, TargetMetrics]
) -> tuple[Target, ...]:
    """P2C (power of two choices): two distinct picks, the one with the higher ``p2c_score``
    first, the other second, then every other target in declared order. ``metrics`` is keyed
    by ``execution_key``.

    The first pick is any target; the second is drawn among the *other* targets that served
    the fewest requests (all of them while the counts are equal). Scores within
    :data:`P2C_TIE_BAND` of each other, or of like success and latency
    (:func:`p2c_comparable`), are a tie, which the pick that served fewer requests wins (equal
    counts: the first pick). The others follow by descending score (the other pick first among
    equals, then declared order), so a fail-over never goes to a known-bad target before a
    healthy one. So a clearly better target still wins its pair, and
    healthy targets of similar latency share the load evenly: at one request at a time none
    is ever more than one request ahead of another (two uniform picks drift several apart).

    Two ``rng.random()`` calls: ``random_index(rng, N)`` for the first pick, then
    ``random_index(rng, k)`` over the k candidates for the second, in declared order. With one
    target (or none) nothing is drawn.
    """
    if len(targets) < 2:
        return tuple(targets)
    known = [metrics.get(execution_key(t)) for t in targets]
    counts = [m.count if m is not None else 0 for m in known]
    first = random_index(rng, len(targets))
    others = [i for i in range(len(targets)) if i != first]
    fewest = min(counts[i] for i in others)
    pool = [i for i in others if counts[i] == fewest]
    second = pool[random_index(rng, len(pool))]
    known_first, known_second = known[first], known[second]
    score_first, score_second = p2c_score(known_first), p2c_score(known_second)
    if p2c_comparable(known_first, known_second):  # a tie: the less used first
        count_first = known_first.count if known_first else 0
        if (known_second.count if known_second else 0) < count_first:
            first, second = second, first
    elif score_second > score_first:
        first, second = second, first
    after = [second, *(i for i in range(len(targets)) if i not in (first, second))]
    after.sort(key=lambda i: -p2c_score(known[i]))  # stable: the other pick, then declared
    return (targets[first], *(targets[i] for i in after))


def last_known_good(
    targets: Sequence[Target], provider: str | None, connection_id: int | None
) -> tuple[Target, ...]:
    """Lkgp: move the combo's last-known-good target to the front, the rest unchanged.

    ``provider`` (a provider slug) and ``connection_id`` are what the caller remembers of the
    last success. The target on that provider and connection moves; failing that (the
    connection is gone, or only the provider is known), the first target of that provider, or
    whose model is named ``<provider>/...``. No match, or no provider: the order is unchanged.
    """
    if provider is None:
        return tuple(targets)
    of_provider = [
        i
        for i, t in enumerate(targets)
        if t.provider.slug == provider or t.model.startswith(f"{provider}/")
    ]
    if not of_provider:
        return tuple(targets)
    exact = [
        i
        for i in of_provider
        if targets[i].provider.slug == provider and targets[i].connection.id == connection_id
    ]
    found = (exact or of_provider)[0]
    return (targets[found], *targets[:found], *targets[found + 1 :])
