"""Hedging a slow first token, the pure part (docs/resilience.md, "Hedging"): the hedge delay, the
learned first-token times it comes from, and the share of a model's attempts that may be
hedges. Nothing here reads a clock: every call is given ``now`` (epoch seconds).

* **The delay.** Off when ``hedgeEnabled`` is false or ``hedgeAfterMs`` is 0 at any level
  that applies (the catalog entry of the model, the combo, the global settings), whatever was
  learned. Otherwise the learned one once the (provider, model) has at least
  :data:`MIN_SAMPLES` first-token times among its last :data:`KEPT_SAMPLES` within
  :data:`SAMPLE_MAX_AGE_SECONDS`: three times their 95th percentile, at least
  :data:`LEARNED_FLOOR_MS`. Until then the configured one: the catalog entry's, else the
  combo's, else the global ``hedgeAfterMs`` (the combo's policy already carries the global
  value when it does not set its own).
* **The samples.** :class:`FirstTokenTimes` keeps, per (provider, model), the last
  :data:`KEPT_SAMPLES` first-token times as (when, milliseconds); what was added since the
  last :meth:`FirstTokenTimes.take_new` is handed out so it can be merged into a shared copy
  (:func:`merge_samples`), and the merged copy replaces this one's view
  (:meth:`FirstTokenTimes.replace`).
* **The budget.** :class:`HedgeBudget` counts a model's attempts and hedges over the last
  :data:`BUDGET_WINDOW_SECONDS`; a hedge is allowed while hedges stay within
  ``hedgeMaxPercent`` of the attempts. One hedge a minute is always allowed while the share
  is above 0: a model asked once a minute could never hedge otherwise.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from resilience.domain.attempts.policy import AttemptPolicy

MIN_SAMPLES = 20
KEPT_SAMPLES = 200
SAMPLE_MAX_AGE_SECONDS = 600.0
LEARNED_FACTOR = 3
LEARNED_PERCENTILE = 95
LEARNED_FLOOR_MS = 2_000
BUDGET_WINDOW_SECONDS = 60.0

Sample = tuple[float, float]  # (when, epoch seconds; first-token time, milliseconds)
PairKey = tuple[str, str]  # (provider slug, model)


def percentile(values: Sequence[float], percent: float) -> float:
    """The nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def recent(samples: Iterable[Sample], now: float) -> list[float]:
    """The first-token times (ms) among the last :data:`KEPT_SAMPLES` samples that are at
    most :data:`SAMPLE_MAX_AGE_SECONDS` old."""
    kept = list(samples)[-KEPT_SAMPLES:]
    return [ms for at, ms in kept if now - at <= SAMPLE_MAX_AGE_SECONDS]


def learned_delay_ms(times_ms: Sequence[float]) -> int | None:
    """Three times the 95th percentile of ``times_ms``, at least :data:`LEARNED_FLOOR_MS`;
    ``None`` with fewer than :data:`MIN_SAMPLES` of them."""
    if len(times_ms) < MIN_SAMPLES:
        return None
    learned = LEARNED_FACTOR * percentile(times_ms, LEARNED_PERCENTILE)
    return max(LEARNED_FLOOR_MS, math.ceil(learned))


def hedge_delay_ms(
    policy: AttemptPolicy, catalog_ms: int | None, times_ms: Sequence[float]
) -> int | None:
    """How long a stream waits for its first token before the next target starts beside it,
    or ``None`` when it never does (see the module docstring). ``policy``: the request's (the
    combo's, or the global); ``catalog_ms``: the model's catalog entry's ``hedge_after_ms``
    (``None``: not set); ``times_ms``: the model's recent first-token times (:func:`recent`)."""
    return delay_from_learned(policy, catalog_ms, learned_delay_ms(times_ms))


def delay_from_learned(
    policy: AttemptPolicy, catalog_ms: int | None, learned_ms: int | None
) -> int | None:
    """:func:`hedge_delay_ms` given the learned delay (:func:`learned_delay_ms`) instead of
    the times it comes from."""
    if not policy.hedge_enabled or policy.hedge_after_ms == 0 or catalog_ms == 0:
        return None
    if learned_ms is not None:
        return learned_ms
    return catalog_ms if catalog_ms is not None else policy.hedge_after_ms


def merge_samples(shared: Sequence[Sample], new: Sequence[Sample], now: float) -> list[Sample]:
    """``new`` added to a shared list of samples: in time order, at most
    :data:`KEPT_SAMPLES`, none older than :data:`SAMPLE_MAX_AGE_SECONDS`."""
    merged = sorted([*shared, *new])
    return [s for s in merged if now - s[0] <= SAMPLE_MAX_AGE_SECONDS][-KEPT_SAMPLES:]


class FirstTokenTimes:
    """This process's first-token times per (provider, model) (see the module docstring)."""

    def __init__(self) -> None:
        self._samples: dict[PairKey, deque[Sample]] = {}
        self._new: dict[PairKey, list[Sample]] = {}

    def add(self, key: PairKey, ms: float, now: float) -> None:
        """One first-token time (or, for an attempt cancelled before its first token, the
        time it waited: the token was at least that late)."""
        sample = (now, float(ms))
        self._samples.setdefault(key, deque(maxlen=KEPT_SAMPLES)).append(sample)
        new = self._new.setdefault(key, [])
        new.append(sample)
        del new[:-KEPT_SAMPLES]

    def times(self, key: PairKey, now: float) -> list[float]:
        """The recent first-token times of ``key`` (:func:`recent`)."""
        return recent(self._samples.get(key, ()), now)

    def take_new(self) -> dict[PairKey, list[Sample]]:
        """The samples added since the last call, per key; forgotten here once taken."""
        new, self._new = self._new, {}
        return new

    def replace(self, key: PairKey, samples: Sequence[Sample]) -> None:
        """``key``'s samples as a shared copy has them, plus any added here since the copy
        was taken (they are merged next time)."""
        pending = self._new.get(key, [])
        merged = sorted([*samples, *pending])[-KEPT_SAMPLES:]
        self._samples[key] = deque(merged, maxlen=KEPT_SAMPLES)

    def keys(self) -> list[PairKey]:
        return list(self._samples)


@dataclass(slots=True)
class _Window:
    """A model's attempts and hedges over the last minute, one bucket per second, so that its
    size stays bounded whatever the traffic."""

    buckets: deque[list[int]]  # [second, attempts, hedges], oldest first
    attempts: int = 0
    hedges: int = 0


class HedgeBudget:
    """A model's attempts and hedges over the last :data:`BUDGET_WINDOW_SECONDS`."""

    def __init__(self) -> None:
        self._windows: dict[str, _Window] = {}

    def _window(self, model: str, now: float) -> _Window:
        window = self._windows.get(model)
        if window is None:
            window = self._windows[model] = _Window(deque())
        while window.buckets and now - window.buckets[0][0] >= BUDGET_WINDOW_SECONDS:
            _, attempts, hedges = window.buckets.popleft()
            window.attempts -= attempts
            window.hedges -= hedges
        return window

    def count(self, model: str, now: float, *, hedge: bool = False) -> None:
        """One attempt of ``model`` started (a hedge, with ``hedge``)."""
        window = self._window(model, now)
        second = int(now)
        if not window.buckets or window.buckets[-1][0] != second:
            window.buckets.append([second, 0, 0])
        window.buckets[-1][1] += 1
        window.buckets[-1][2] += hedge
        window.attempts += 1
        window.hedges += hedge

    def allows(self, model: str, max_percent: int, now: float) -> bool:
        """Whether one more hedge keeps ``model``'s hedges within ``max_percent`` of its
        attempts in the last minute (the first hedge of a minute always, above 0 %)."""
        if max_percent <= 0:
            return False
        window = self._window(model, now)
        if window.hedges == 0:
            return True
        return (window.hedges + 1) * 100 <= max_percent * (window.attempts + 1)
