"""The quota-driven target orderings (pure).

Each function takes one request's targets and a ``snapshots`` lookup (a target's latest
``QuotaSnapshot``, None when unknown: the caller fetches them beforehand, keyed however it
likes, usually by connection id) and returns the targets as a new tuple, a permutation:

* ``reset_aware`` - reset-aware (item 10): prefer the account whose quota would otherwise go
  to waste, i.e. much left and a reset coming soon, scored by ``reset_aware_score``;
  near-equal scores take turns;
* ``reset_window`` - reset-window (item 11): the account whose window resets soonest first;
  near-equal resets take turns;
* ``headroom`` - headroom (item 12): the account with the most unused 5-hour / weekly quota
  first.

Skipping connections that are cooling down or exhausted is the caller's job (the eligibility
filters); here an exhausted account (``limit_reached``) is merely ranked last by reset-aware.
``now`` is epoch seconds, the same clock as the snapshots' resets; ``counter`` is the
caller's per-combo request count (``reset-aware:<combo>``, ``reset-window:<combo>``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from routing.domain.plan.planning import Target
from routing.domain.quota.snapshots import (
    MONTHLY,
    SESSION,
    WEEKLY,
    QuotaSnapshot,
    QuotaWindow,
    used_fraction,
)

__all__ = [
    "ResetAwareConfig",
    "SnapshotLookup",
    "headroom",
    "reset_aware",
    "reset_aware_score",
    "reset_window",
]

SnapshotLookup = Callable[[Target], QuotaSnapshot | None]

NO_QUOTA_SCORE = 0.5  # a target whose quota is unknown: neither preferred nor avoided
UNKNOWN_USED = 0.5  # the used fraction assumed when the snapshot gives no overall figure
UNKNOWN_URGENCY = 0.5  # a window whose reset is unknown
GUARD_FLOOR = 0.05  # the exhaustion guard never scales a score below 5 % of itself
MONTHLY_SHARE = 0.25  # a monthly window's share of the score, where there is one
DEFAULT_SESSION_WEIGHT = 0.35
DEFAULT_WEEKLY_WEIGHT = 0.65
HOUR_SECONDS = 3600.0
DAY_SECONDS = 86_400.0


@dataclass(frozen=True, slots=True)
class _WindowShape:
    """How one window scores: its length, and the weights of remaining quota (``a``) and of
    quota about to be lost at the reset (``b``)."""

    seconds: float
    a: float
    b: float


_SESSION_SHAPE = _WindowShape(5 * HOUR_SECONDS, 0.45, 0.55)
_WEEKLY_SHAPE = _WindowShape(7 * DAY_SECONDS, 0.25, 0.75)
_MONTHLY_SHAPE = _WindowShape(30 * DAY_SECONDS, 0.25, 0.75)


@dataclass(frozen=True, slots=True)
class ResetAwareConfig:
    """The reset-aware settings (``resetAware*``). The two weights are normalised to
    sum to 1 (negative or non-finite ones count as 0; both 0: the defaults 0.35 / 0.65). The
    tie band and the exhaustion guard are percents of the score scale (5 -> 0.05)."""

    session_weight: float = DEFAULT_SESSION_WEIGHT
    weekly_weight: float = DEFAULT_WEEKLY_WEIGHT
    tie_band_percent: float = 5.0
    exhaustion_guard_percent: float = 10.0

    def __post_init__(self) -> None:
        session, weekly = _non_negative(self.session_weight), _non_negative(self.weekly_weight)
        total = session + weekly
        if total <= 0:
            session, weekly, total = DEFAULT_SESSION_WEIGHT, DEFAULT_WEEKLY_WEIGHT, 1.0
        object.__setattr__(self, "session_weight", session / total)
        object.__setattr__(self, "weekly_weight", weekly / total)

    @property
    def tie_band(self) -> float:
        """The tie band as a score difference (0.05 by default; never negative)."""
        return _non_negative(self.tie_band_percent) / 100

    @property
    def exhaustion_guard(self) -> float:
        """The session share below which the guard scales the score down (0.10 by default)."""
        return _non_negative(self.exhaustion_guard_percent) / 100


def reset_aware_score(
    snapshot: QuotaSnapshot | None, now: float, config: ResetAwareConfig
) -> float:
    """The reset-aware score of one account; higher goes first.

    No snapshot: 0.5. Limit reached: -inf. Otherwise each window scores
    ``a * remaining + b * urgency * (1 - remaining)``, where ``remaining`` is the unused
    fraction (the window's, else ``1 - overall``; overall defaults to 0.5) and ``urgency``
    grows from 0 to 1 as the reset approaches over the window's length (0.5 when unknown, 1
    when past). Session (5 h: a 0.45, b 0.55) and weekly (7 d: a 0.25, b 0.75; its reset falls
    back to the snapshot's) are mixed by the configured weights; a monthly window (30 d, a 0.25,
    b 0.75), where present, takes a quarter of the score. When less than the exhaustion guard
    of the session remains, the score is scaled by ``max(0.05, remaining / guard)``.
    """
    if snapshot is None:
        return NO_QUOTA_SCORE
    if snapshot.limit_reached:
        return -math.inf
    overall = _clamp01(_known_or(snapshot.percent_used, UNKNOWN_USED))
    windows = snapshot.windows
    session_remaining = _remaining(windows.get(SESSION), overall)
    session = _window_score(_SESSION_SHAPE, session_remaining, _reset(windows.get(SESSION)), now)
    weekly_reset = _reset(windows.get(WEEKLY))
    weekly_reset = snapshot.reset_at if weekly_reset is None else weekly_reset
    weekly_remaining = _remaining(windows.get(WEEKLY), overall)
    weekly = _window_score(_WEEKLY_SHAPE, weekly_remaining, weekly_reset, now)
    score = config.session_weight * session + config.weekly_weight * weekly
    monthly_window = windows.get(MONTHLY)
    if monthly_window is not None:
        monthly_remaining = _remaining(monthly_window, overall)
        monthly = _window_score(_MONTHLY_SHAPE, monthly_remaining, monthly_window.reset_at, now)
        score = (1 - MONTHLY_SHARE) * score + MONTHLY_SHARE * monthly
    guard = config.exhaustion_guard
    if session_remaining < guard:
        score *= max(GUARD_FLOOR, session_remaining / guard)
    return score


def reset_aware(
    targets: Sequence[Target],
    snapshots: SnapshotLookup,
    now: float,
    config: ResetAwareConfig,
    counter: int,
) -> tuple[Target, ...]:
    """Reset-aware: descending by ``reset_aware_score`` (ties: declared order). The targets
    scoring within the tie band of the best (score >= best - band) take turns at the front,
    rotated by ``counter mod k``; the others follow by score (so when every target has reached
    its limit, they all take turns). Each snapshot is looked up once."""
    scores = [reset_aware_score(snapshots(t), now, config) for t in targets]
    order = sorted(range(len(targets)), key=lambda i: (-scores[i], i))
    if not order:
        return ()
    floor = scores[order[0]] - config.tie_band
    tied = sum(1 for i in order if scores[i] >= floor)
    return tuple(targets[i] for i in _rotate_front(order, tied, counter))


def reset_window(
    targets: Sequence[Target],
    snapshots: SnapshotLookup,
    now: float,
    windows: Sequence[str] = (WEEKLY,),
    tie_band_ms: float = 60_000,
    counter: int = 0,
) -> tuple[Target, ...]:
    """Reset-window: ascending by the milliseconds until the earliest reset among ``windows``
    (names such as ``session``, ``weekly``, ``monthly``; a window the snapshot lacks, or whose
    reset is unknown, is skipped; a past reset counts as 0; none known, or no snapshot: +inf),
    ties in declared order. The targets within ``tie_band_ms`` of the best take turns at the
    front, rotated by ``counter mod k``; ``tie_band_ms`` <= 0 turns the rotation off, and so
    does a best that is unknown (nothing to be near). One ``now`` for the whole ranking."""
    keys = [_ms_until_reset(snapshots(t), windows, now) for t in targets]
    order = sorted(range(len(targets)), key=lambda i: (keys[i], i))
    if not order:
        return ()
    best = keys[order[0]]
    if not tie_band_ms > 0 or math.isinf(best):
        return tuple(targets[i] for i in order)
    tied = sum(1 for i in order if keys[i] <= best + tie_band_ms)
    return tuple(targets[i] for i in _rotate_front(order, tied, counter))


def headroom(targets: Sequence[Target], snapshots: SnapshotLookup) -> tuple[Target, ...]:
    """Headroom: descending by ``1 - max(session used, weekly used)`` (a window missing or
    without a figure counts as 0 used; no snapshot: full headroom, 1.0); stable."""

    def room(target: Target) -> float:
        snapshot = snapshots(target)
        if snapshot is None:
            return 1.0
        used = (_used(snapshot.windows.get(name)) or 0.0 for name in (SESSION, WEEKLY))
        return 1.0 - max(used)

    return tuple(sorted(targets, key=lambda t: -room(t)))


# -- helpers --------------------------------------------------------------------------------------


def _rotate_front(order: list[int], tied: int, counter: int) -> list[int]:
    """``order`` with its first ``tied`` entries rotated left by ``counter mod tied``."""
    if tied <= 1:
        return order
    start = counter % tied
    return [*order[start:tied], *order[:start], *order[tied:]]


def _ms_until_reset(snapshot: QuotaSnapshot | None, windows: Sequence[str], now: float) -> float:
    if snapshot is None:
        return math.inf
    resets = [_reset(snapshot.windows.get(name)) for name in windows]
    known = [max(0.0, (reset - now) * 1000) for reset in resets if reset is not None]
    return min(known, default=math.inf)


def _window_score(
    shape: _WindowShape, remaining: float, reset_at: float | None, now: float
) -> float:
    urgency = _urgency(reset_at, shape.seconds, now)
    return shape.a * remaining + shape.b * urgency * (1 - remaining)


def _urgency(reset_at: float | None, window_seconds: float, now: float) -> float:
    """0.5 when the reset is unknown, 1 when it is past, else 1 - time left / window length."""
    if reset_at is None:
        return UNKNOWN_URGENCY
    if reset_at <= now:
        return 1.0
    return _clamp01(1 - (reset_at - now) / window_seconds)


def _remaining(window: QuotaWindow | None, overall: float) -> float:
    used = _used(window)
    return _clamp01(1 - (overall if used is None else used))


def _used(window: QuotaWindow | None) -> float | None:
    """A window's used fraction (a figure above 1 read as a percent), or None."""
    return None if window is None else used_fraction(window.percent_used)


def _reset(window: QuotaWindow | None) -> float | None:
    if window is None or window.reset_at is None or not math.isfinite(window.reset_at):
        return None
    return window.reset_at


def _known_or(value: float | None, default: float) -> float:
    return default if value is None or math.isnan(value) else value


def _non_negative(value: float) -> float:
    return value if math.isfinite(value) and value > 0 else 0.0


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value)) if not math.isnan(value) else 0.0
