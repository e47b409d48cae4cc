"""A combo's per-strategy options (pure): which keys each strategy takes, their defaults and
bounds, strict validation for writes and a lenient typed read for the hot path.

An operator tunes a combo's strategy with a JSON object of camelCase keys
(docs/routing.md, "Strategies"): ``{"stickyRoundRobinLimit": 3}`` keeps each round-robin member
for three requests. Every strategy takes ``compatFilterFailOpen``; the other keys belong to one
strategy each, and a key of another strategy is refused, so
that an option never silently does nothing.

- ``combo_options_validate`` (admin, API, through ``Combo.clean``): unknown keys, keys of
  another strategy, wrong types and out-of-range values are errors naming the key; the values
  kept are normalised (``5.0`` is ``5``, lists lose their duplicates).
- ``options_read`` (building the routing snapshot): a ``ComboOptions`` with every key filled,
  the stored value where it is still valid for the strategy, else the default; a stored value
  never breaks routing (say, after the combo's strategy changed behind the service's back).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from routing.domain.config.vocabulary import Strategy

ROOT = "options"  # the error key of problems with the object as a whole
COMMON = "*"  # the pseudo-strategy whose keys every strategy takes

_SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")  # as Django's SlugField, which provider slugs are
_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")

AUTO_MODES = (
    "rules",
    "score",
    "smart",
    "cost",
    "eco",
    "latency",
    "fast",
    "sla-aware",
    "sla",
    "lkgp",
)
# The auto strategy's scoring factors, as its weights name them.
AUTO_FACTORS = (
    "quota",
    "health",
    "costInv",
    "latencyInv",
    "taskFit",
    "stability",
    "tierPriority",
    "tierAffinity",
    "specificityMatch",
    "contextAffinity",
    "sessionAvailability",
    "connectionDensity",
    "cacheAffinity",
    "resetWindowAffinity",
    "quality",
)
RESET_WINDOWS = ("session", "weekly", "monthly")
MAX_NUMBER = 10**18  # past any option's bound; an integer past it is refused before any float
MAX_WEIGHT = 1_000_000  # an auto weight (relative: the weights are summed and normalised)


class OptionKind(StrEnum):
    """What an option holds."""

    BOOL = "bool"
    INT = "int"
    NUMBER = "number"  # an integer or a decimal
    CHOICE = "choice"  # one of ``choices``
    SUBSET = "subset"  # a non-empty list of ``choices``
    SLUGS = "slugs"  # a list of provider slugs, maybe empty
    WEIGHTS = "weights"  # an object mapping an auto factor to a non-negative number, or null
    MODEL = "model"  # ``provider/model``, or "" for none


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option: its key, kind, default, bounds (both inclusive unless ``exclusive``) and the
    choices of a ``CHOICE`` or ``SUBSET``."""

    key: str
    kind: OptionKind
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    choices: tuple[str, ...] = ()

    @property
    def field(self) -> str:
        """The ``ComboOptions`` attribute: ``stickyWeightedLimit`` → ``sticky_weighted_limit``."""
        return _WORD_START.sub("_", self.key).lower()

    def describe(self) -> str:
        """``key`` with its bounds or choices and default, for help texts."""
        if self.minimum is not None and self.maximum is not None:
            low, high = _shown(self.minimum), _shown(self.maximum)
            span = f"{low} < x < {high}" if self.exclusive else f"{low}–{high}"
        elif self.choices:
            span = "|".join(self.choices)
        else:
            span = _KIND_TEXT.get(self.kind, self.kind.value)
        return f"{self.key} ({span}; default {_default_text(self.default)})"


def _spec(key: str, kind: OptionKind, default: Any, *bounds: float, **more: Any) -> OptionSpec:
    low, high = bounds if bounds else (None, None)
    return OptionSpec(key, kind, default, low, high, **more)


_B, _I, _N = OptionKind.BOOL, OptionKind.INT, OptionKind.NUMBER
_KIND_TEXT = {
    OptionKind.BOOL: "true|false",
    OptionKind.SLUGS: "a list of provider slugs",
    OptionKind.WEIGHTS: "an object of factor: weight",
    OptionKind.MODEL: "provider/model or empty",
}

# The keys each strategy takes, besides the common ones.
OPTION_SPECS: dict[str, tuple[OptionSpec, ...]] = {
    COMMON: (_spec("compatFilterFailOpen", _B, False),),
    Strategy.WEIGHTED: (_spec("stickyWeightedLimit", _I, 1, 1, 1000),),
    Strategy.ROUND_ROBIN: (
        _spec("stickyRoundRobinLimit", _I, 1, 1, 1000),
        _spec("memberConcurrency", _I, 0, 0, 1000),  # 0: no per-member semaphore
    ),
    Strategy.RESET_AWARE: (
        _spec("resetAwareSessionWeight", _N, 0.35, 0, 1),
        _spec("resetAwareWeeklyWeight", _N, 0.65, 0, 1),
        _spec("resetAwareTieBandPercent", _N, 5, 0, 100),
        _spec("resetAwareExhaustionGuardPercent", _N, 10, 0, 100),
        _spec("resetAwareQuotaCacheTtlMs", _I, 0, 0, 300_000),
        _spec("resetAwareQuotaCacheMaxStaleMs", _I, 0, 0, 3_600_000),
    ),
    Strategy.RESET_WINDOW: (
        _spec("resetWindowWindows", OptionKind.SUBSET, ("weekly",), choices=RESET_WINDOWS),
        _spec("resetWindowIncludeSession", _B, False),
        _spec("resetWindowTieBandMs", _I, 60_000, -1, 86_400_000),  # ≤ 0: no tie band
    ),
    Strategy.CONTEXT_RELAY: (
        _spec("handoffProviders", OptionKind.SLUGS, ("codex",)),
        _spec("handoffThreshold", _N, 0.85, 0, 0.95, exclusive=True),
    ),
    Strategy.AUTO: (
        _spec("mode", OptionKind.CHOICE, "rules", choices=AUTO_MODES),
        _spec("weights", OptionKind.WEIGHTS, None),
        _spec("explorationRate", _N, 0.05, 0, 1),
    ),
    Strategy.FUSION: (
        _spec("judgeModel", OptionKind.MODEL, ""),  # "": the first panel model judges
        _spec("minPanel", _I, 2, 2, 20),
        _spec("stragglerGraceMs", _I, 8_000, 0, 120_000),
        _spec("panelHardTimeoutMs", _I, 90_000, 1_000, 600_000),
    ),
}
_OWNER = {spec.key: strategy for strategy, specs in OPTION_SPECS.items() for spec in specs}


@dataclass(frozen=True, slots=True)
class ComboOptions:
    """Every option with its value for one combo (the defaults where the combo sets none, or
    where a key is not its strategy's). Fields are the keys in snake_case."""

    compat_filter_fail_open: bool = False
    sticky_weighted_limit: int = 1
    sticky_round_robin_limit: int = 1
    member_concurrency: int = 0
    reset_aware_session_weight: float = 0.35
    reset_aware_weekly_weight: float = 0.65
    reset_aware_tie_band_percent: float = 5
    reset_aware_exhaustion_guard_percent: float = 10
    reset_aware_quota_cache_ttl_ms: int = 0
    reset_aware_quota_cache_max_stale_ms: int = 0
    reset_window_windows: tuple[str, ...] = ("weekly",)
    reset_window_include_session: bool = False
    reset_window_tie_band_ms: int = 60_000
    handoff_providers: tuple[str, ...] = ("codex",)
    handoff_threshold: float = 0.85
    mode: str = "rules"
    weights: tuple[tuple[str, float], ...] | None = None  # (factor, weight), as given
    exploration_rate: float = 0.05
    judge_model: str = ""
    min_panel: int = 2
    straggler_grace_ms: int = 8_000
    panel_hard_timeout_ms: int = 90_000

    @property
    def weight_map(self) -> dict[str, float] | None:
        """The auto strategy's custom weights by factor, or ``None`` for its defaults."""
        return dict(self.weights) if self.weights is not None else None


DEFAULT_OPTIONS = ComboOptions()


class ComboOptionsError(ValueError):
    """Refused options; ``errors`` maps each bad key (or ``ROOT``) to its message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(self.messages()))

    def messages(self) -> list[str]:
        """Each error as one line naming its key: ``"minPanel: must be between 2 and 20"``."""
        return [m if k == ROOT else f"{k}: {m}" for k, m in self.errors.items()]


def option_specs(strategy: str) -> tuple[OptionSpec, ...]:
    """The options ``strategy`` takes: the common ones, then its own."""
    return OPTION_SPECS[COMMON] + OPTION_SPECS.get(strategy, ())


def options_help(strategy: str) -> str:
    """The keys ``strategy`` takes, with bounds and defaults, for help texts."""
    return ", ".join(spec.describe() for spec in option_specs(strategy))


def combo_options_validate(strategy: str, raw: Any) -> dict[str, Any]:
    """``raw`` checked strictly against ``strategy``'s keys, normalised; ``ComboOptionsError``
    naming each bad key. ``None`` stands for no options."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ComboOptionsError({ROOT: "must be a JSON object"})
    specs = {spec.key: spec for spec in option_specs(strategy)}
    checked: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key, value in raw.items():
        spec = specs.get(str(key))
        if spec is None:
            errors[str(key)] = _foreign(str(key), strategy)
            continue
        try:
            checked[spec.key] = _checked(spec, value)
        except ValueError as error:
            errors[spec.key] = str(error)
    if errors:
        raise ComboOptionsError(errors)
    return checked


def options_read(strategy: str, raw: Any) -> ComboOptions:
    """The options of a combo of ``strategy`` whose stored value is ``raw``: each of the
    strategy's keys that ``raw`` holds validly, the defaults for everything else."""
    if not isinstance(raw, Mapping) or not raw:
        return DEFAULT_OPTIONS
    values: dict[str, Any] = {}
    for spec in option_specs(strategy):
        if spec.key not in raw:
            continue
        try:
            values[spec.field] = _typed(spec, _checked(spec, raw[spec.key]))
        except ValueError:
            continue  # an invalid stored value: the default applies
    return ComboOptions(**values)


def _foreign(key: str, strategy: str) -> str:
    owner = _OWNER.get(key)
    if owner is not None:
        return f"an option of the {owner} strategy, not of {strategy}"
    known = ", ".join(spec.key for spec in option_specs(strategy))
    return f"unknown key (the keys of {strategy} are {known})"


def _typed(spec: OptionSpec, value: Any) -> Any:
    """A validated JSON value as ``ComboOptions`` holds it (lists as tuples)."""
    if spec.kind in (OptionKind.SUBSET, OptionKind.SLUGS):
        return tuple(value)
    if spec.kind is OptionKind.WEIGHTS and value is not None:
        return tuple((str(k), float(v)) for k, v in value.items())
    return value


def _checked(option: OptionSpec, value: Any) -> Any:
    """``value`` validated and normalised for ``option``, or ``ValueError`` saying why."""
    kind = option.kind
    if kind is OptionKind.BOOL:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if kind in (OptionKind.INT, OptionKind.NUMBER):
        return _bounded(option, _number(value, integer=kind is OptionKind.INT))
    if kind is OptionKind.CHOICE:
        if value not in option.choices:
            raise ValueError(f"must be one of {', '.join(option.choices)}")
        return value
    if kind is OptionKind.SUBSET:
        return _subset(option, value)
    if kind is OptionKind.SLUGS:
        return _slugs(value)
    if kind is OptionKind.WEIGHTS:
        return _weights(value)
    return _model(value)


def _number(value: Any, *, integer: bool) -> int | float:
    """A JSON number, an integral one as ``int``; ``integer``: only integral ones. One past
    ``MAX_NUMBER`` (an integer of hundreds of digits, which no float holds) is out of range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be an integer" if integer else "must be a number")
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        raise ValueError(f"is out of range (at most {MAX_NUMBER:.0e} either way)")
    if not math.isfinite(value):
        raise ValueError("must be an integer" if integer else "must be a number")
    number: int | float = value
    if isinstance(number, float) and number.is_integer():
        return int(number)
    if integer and not isinstance(number, int):
        raise ValueError("must be an integer")
    return number


def _bounded(spec: OptionSpec, number: int | float) -> int | float:
    low, high = spec.minimum, spec.maximum
    if low is None or high is None:
        return number
    if spec.exclusive and not low < number < high:
        raise ValueError(f"must be greater than {_shown(low)} and less than {_shown(high)}")
    if not low <= number <= high:
        raise ValueError(f"must be between {_shown(low)} and {_shown(high)}")
    return number


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of {what}")
    return list(dict.fromkeys(value))  # duplicates dropped, order kept


def _subset(spec: OptionSpec, value: Any) -> list[str]:
    items = _strings(value, "names")
    unknown = [item for item in items if item not in spec.choices]
    if not items or unknown:
        raise ValueError(f"must be a non-empty list of {', '.join(spec.choices)}")
    return items


def _slugs(value: Any) -> list[str]:
    items = _strings(value, "provider slugs")
    bad = [item for item in items if not _SLUG.match(item)]
    if bad:
        raise ValueError(f"not provider slugs: {', '.join(bad)}")
    return items


def _weights(value: Any) -> dict[str, int | float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError("must be an object mapping a factor to a non-negative number")
    unknown = [str(k) for k in value if k not in AUTO_FACTORS]
    if unknown:
        raise ValueError(f"unknown factors {', '.join(unknown)} (known: {', '.join(AUTO_FACTORS)})")
    weights = {str(k): _number(v, integer=False) for k, v in value.items()}
    wrong = [k for k, v in weights.items() if not 0 <= v <= MAX_WEIGHT]
    if wrong:  # relative weights: their sum must stay a number
        raise ValueError(f"weights are numbers from 0 to {MAX_WEIGHT:,}: {', '.join(wrong)}")
    return weights


def _model(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string: provider/model, or empty")
    provider, _, model = value.partition("/")
    if value and (not provider or not model):
        raise ValueError("must be provider/model, or empty")
    return value


def _shown(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    if value is None:
        return "none"
    return '""' if value == "" else str(value)
