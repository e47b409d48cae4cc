"""The target orderings of the simple combo strategies (pure, reference-part2 §7.2).

Each function takes one request's targets and returns them as a new tuple in the order the
attempt loop tries them: a permutation (nothing lost, nothing duplicated); the input is never
changed. What a strategy remembers between requests (a round-robin counter, usage counts,
metrics, a strict-random deck) is the caller's state, passed in:

* ``declared`` - priority, fill-first, context-relay (item 1, 4, 5): the declared order;
* ``shuffled`` - random (item 7): Fisher-Yates over all targets;
* ``weighted`` - weighted (item 2): one weighted draw first, the rest by descending weight;
* ``round_robin`` - round-robin (item 3): the declared order rotated to ``counter mod N``;
* ``least_used`` - least-used (item 8): ascending request count per execution key;
* ``cost_ordered`` - cost-optimized (item 9): ascending input price, unknown last;
* ``p2c`` - p2c (item 6): the better of two random picks first, then the other pick;
* ``strict_random`` - strict-random (item 13): a deck per combo drawn without replacement;
* ``last_known_good`` - lkgp (item 15): the last target that served the combo first;
* ``context_optimized`` - context-optimized (item 16): descending by context window.

Randomness comes from an injected ``rng`` (a ``random.Random`` or anything with ``random()``
returning a float in [0, 1)); only ``rng.random()`` is called, and a random index below ``n``
is ``int(rng.random() * n)`` (clamped to ``n - 1``), so a seeded ``random.Random`` gives a
reproducible order. Pre-screening and exclusion (breakers, cooldowns, §7.3) are not done
here: the caller passes the targets it may try.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from resilience.domain.breaker_state import BreakerState
from routing.domain.planning import Target
from routing.domain.quota_share import execution_key

UNKNOWN_SUCCESS_SCORE = 0.5  # p2c: successRate / 100 when the success rate is unknown
UNKNOWN_LATENCY_SCORE = 0.25  # p2c: the latency term when the latency is unknown or <= 0
HALF_OPEN_PENALTY = 0.25  # p2c: subtracted from a target whose breaker is HALF_OPEN
P2C_TIE_BAND = 0.02  # p2c: scores this close are a tie (about 2 points of success rate)
P2C_LATENCY_TIE_MS = 100.0  # p2c: latencies this close are a tie (network and machine noise)
P2C_LATENCY_TIE_SHARE = 0.5  # p2c: and so are latencies within 50 % of each other
P2C_MIN_SAMPLES = 5  # p2c: a target with fewer requests is not judged by its metrics yet
P2C_STALE_SECONDS = 60.0  # p2c: nor one whose last request is older (it may have recovered)
_HUGE_WEIGHT = 1e300  # weighted: above this, weights are scaled before they are summed

__all__ = [
    "Deck",
    "RandomSource",
    "TargetMetrics",
    "context_optimized",
    "cost_ordered",
    "declared",
    "execution_key",
    "last_known_good",
    "least_used",
    "p2c",
    "p2c_score",
    "round_robin",
    "shuffled",
    "strict_random",
    "weighted",
]


class RandomSource(Protocol):
    """The randomness the orderings use: ``random.Random`` satisfies it."""

    def random(self) -> float:
        """A float in [0, 1)."""
        ...


def _index(rng: RandomSource, n: int) -> int:
    """A random index in ``range(n)`` (``n`` >= 1) from one ``rng.random()`` call."""
    return min(int(rng.random() * n), n - 1)


def _fisher_yates(items: list[Target], rng: RandomSource) -> None:
    """Shuffle ``items`` in place: for i from the last index down to 1, swap item i with a
    random item j in 0..i (``_index(rng, i + 1)``)."""
    for i in range(len(items) - 1, 0, -1):
        j = _index(rng, i + 1)
        items[i], items[j] = items[j], items[i]


def declared(targets: Sequence[Target]) -> tuple[Target, ...]:
    """Priority / fill-first: the declared order, unchanged."""
    return tuple(targets)


def shuffled(targets: Sequence[Target], rng: RandomSource) -> tuple[Target, ...]:
    """Random: a Fisher-Yates shuffle of all targets (N - 1 ``rng.random()`` calls, from
    the last position down, each swapping position i with a random position in 0..i)."""
    items = list(targets)
    _fisher_yates(items, rng)
    return tuple(items)


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
        drawn = _index(rng, len(targets))
    rest = sorted((i for i in range(len(targets)) if i != drawn), key=lambda i: -clean[i])
    return (targets[drawn], *(targets[i] for i in rest))


def round_robin(targets: Sequence[Target], counter: int) -> tuple[Target, ...]:
    """Round-robin: the declared order rotated to start at ``counter mod N`` and wrap around.

    ``counter`` is the caller's count of this combo's requests so far (0 for the first)."""
    if not targets:
        return ()
    start = counter % len(targets)
    return (*targets[start:], *targets[:start])


def least_used(targets: Sequence[Target], counts: Mapping[str, float]) -> tuple[Target, ...]:
    """Least-used: ascending by ``counts[execution_key(target)]`` (unknown = 0); stable."""
    return tuple(sorted(targets, key=lambda t: counts.get(execution_key(t), 0)))


def cost_ordered(
    targets: Sequence[Target], price_of: Callable[[Target], float | None]
) -> tuple[Target, ...]:
    """Cost-optimized: ascending by ``price_of(target)``, the model's input price per million
    tokens; unknown (``None`` or NaN) sorts as +inf. Stable: equal prices (the same model on
    several connections) keep their declared order."""

    def price(target: Target) -> float:
        value = price_of(target)
        return math.inf if value is None or math.isnan(value) else value

    return tuple(sorted(targets, key=price))


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

    Two ``rng.random()`` calls: ``_index(rng, N)`` for the first pick, then ``_index(rng, k)``
    over the k candidates for the second, in declared order. With one target (or none)
    nothing is drawn.
    """
    if len(targets) < 2:
        return tuple(targets)
    known = [metrics.get(execution_key(t)) for t in targets]
    counts = [m.count if m is not None else 0 for m in known]
    first = _index(rng, len(targets))
    others = [i for i in range(len(targets)) if i != first]
    fewest = min(counts[i] for i in others)
    pool = [i for i in others if counts[i] == fewest]
    second = pool[_index(rng, len(pool))]
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


class Deck:
    """The strict-random state of one combo: the execution keys not drawn yet, and the key
    set they were dealt from. Not thread-safe (one event loop; the caller serialises)."""

    __slots__ = ("_cards", "_members")

    def __init__(self) -> None:
        self._cards: list[str] = []  # drawn from the end
        self._members: frozenset[str] = frozenset()

    @property
    def remaining(self) -> tuple[str, ...]:
        """The keys still to be drawn, the next one first."""
        return tuple(reversed(self._cards))

    def draw(self, keys: Sequence[str], rng: RandomSource) -> str:
        """The next key, after a refill (a fresh shuffle of the distinct ``keys``) when the
        deck is empty or was dealt from another key set."""
        members = frozenset(keys)
        if not self._cards or members != self._members:
            cards = list(dict.fromkeys(keys))
            for i in range(len(cards) - 1, 0, -1):
                j = _index(rng, i + 1)
                cards[i], cards[j] = cards[j], cards[i]
            self._cards = cards
            self._members = members
        return self._cards.pop()


def strict_random(targets: Sequence[Target], deck: Deck, rng: RandomSource) -> tuple[Target, ...]:
    """Strict-random: draw the next execution key from ``deck`` (this combo's deck, refilled
    with a fresh shuffle when empty or when the targets' key set changed), put its target
    first (the first one, if two targets share the key) and the rest after it, freshly
    shuffled. Over N requests on N distinct keys every target comes first exactly once."""
    if not targets:
        return ()
    keys = [execution_key(t) for t in targets]
    drawn = keys.index(deck.draw(keys, rng))
    rest = [t for i, t in enumerate(targets) if i != drawn]
    _fisher_yates(rest, rng)
    return (targets[drawn], *rest)


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


def context_optimized(
    targets: Sequence[Target], context_window: Callable[[Target], int | None]
) -> tuple[Target, ...]:
    """Context-optimized: descending by ``context_window(target)``, the model's context window
    in tokens (unknown, ``None``, sorts as 0); stable. When no target's window is known, the
    declared order is kept."""
    windows = [context_window(t) for t in targets]
    if all(w is None for w in windows):
        return tuple(targets)
    order = sorted(range(len(targets)), key=lambda i: -(windows[i] or 0))
    return tuple(targets[i] for i in order)
