"""The availability scenarios, their load plan, their results and the bars they must meet
(the package docstring says how the faults and bars are chosen)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

OK: Final = "200"
COOLING: Final = "503 all_targets_cooling_down"
SECTION_TITLE: Final = "## Availability"


SIGMAS: Final = 4.0  # how far a measured fault or baseline rate may stray by chance


@dataclass(frozen=True, slots=True)
class Scenario:
    """How many connections the provider has (0: the direct baseline, no gateway), which
    fault its upstream injects, and what counts as a pass: a fixed share answered
    (``min_success``) or the direct baseline less ``below_direct``."""

    name: str
    connections: int
    min_success: float | None = None
    cooling_allowed: bool = True
    hinted: bool = False  # the 429 with Retry-After, else the random status
    below_direct: float | None = None
    per_model_quota: bool | None = None  # the provider's flag; None leaves the default

    @property
    def direct(self) -> bool:
        return self.connections == 0


SCENARIOS: Final = (
    Scenario("two connections", 2, 0.995, cooling_allowed=False),
    Scenario("one connection", 1, 0.99, cooling_allowed=True),
)
DIRECT: Final = Scenario("direct (no gateway, no retry)", 0, hinted=True)
ONE_HINTED, TWO_HINTED = "hinted, one connection", "hinted, two connections"
HINTED: Final = (
    DIRECT,
    Scenario(
        f"{ONE_HINTED}, per_model_quota=true",
        1,
        hinted=True,
        below_direct=0.01,
        per_model_quota=True,
    ),
    Scenario(
        f"{ONE_HINTED}, per_model_quota=false",
        1,
        hinted=True,
        below_direct=0.01,
        per_model_quota=False,
    ),
    Scenario(f"{TWO_HINTED}, per_model_quota=true", 2, 0.995, hinted=True, per_model_quota=True),
    Scenario(f"{TWO_HINTED}, per_model_quota=false", 2, 0.995, hinted=True, per_model_quota=False),
)
ALL_SCENARIOS: Final = SCENARIOS + HINTED


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """The load of every scenario and the failures the fake upstream injects."""

    requests: int = 3000
    concurrency: int = 16
    duration: float = 40.0  # seconds cap per scenario: seven of them in a full run
    error_rate: float = 0.05
    status: int = 503
    seed: int = 1
    hinted_rate: float = 0.04
    retry_after: int = 1
    hinted_concurrency: int = 8

    def knobs(self, scenario: Scenario) -> dict[str, object]:
        """The fake upstream's knobs for the scenario's fault."""
        if scenario.hinted:
            return {"status": 429, "retry_after": self.retry_after, "error_rate": self.hinted_rate}
        return {"status": self.status, "error_rate": self.error_rate}

    def rate(self, scenario: Scenario) -> float:
        return self.hinted_rate if scenario.hinted else self.error_rate

    def fault(self, scenario: Scenario) -> str:
        if scenario.hinted:
            return f"{self.hinted_rate:.0%} 429 Retry-After: {self.retry_after}"
        return f"{self.error_rate:.0%} {self.status}"

    def load(self, scenario: Scenario) -> LoadPlan:
        """This plan with the scenario's concurrency."""
        if not scenario.hinted:
            return self
        return dataclasses.replace(self, concurrency=self.hinted_concurrency)


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """What the clients got in one scenario, and what the upstream did."""

    scenario: Scenario
    outcomes: dict[str, int]
    seconds: float
    upstream: dict[str, int] = field(default_factory=dict)
    rate: float | None = None  # the share of calls the fake upstream was asked to fail
    planned: int = 0  # the requests the plan asked for (fewer when the duration ran out)
    fault: str = ""  # the fault, in words
    concurrency: int = 0
    per_model_quota: bool | None = None  # the provider's flag as the gateway stored it

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values())

    @property
    def success_rate(self) -> float:
        return self.outcomes.get(OK, 0) / self.requests if self.requests else 0.0

    @property
    def cooling(self) -> int:
        return self.outcomes.get(COOLING, 0)

    @property
    def other_errors(self) -> dict[str, int]:
        return {k: n for k, n in self.outcomes.items() if k not in (OK, COOLING)}

    @property
    def injected_rate(self) -> float:
        calls = self.upstream.get("chat", 0)
        return self.upstream.get("failed", 0) / calls if calls else 0.0

    def bar(self, direct: float | None) -> float | None:
        """The share this scenario must answer, given the direct baseline's; None when it has
        no bar (the baseline itself, or a bar relative to a baseline that was not measured)."""
        below = self.scenario.below_direct
        if below is None:
            return self.scenario.min_success
        return None if direct is None else direct - below

    def failures(self, direct: float | None = None) -> list[str]:
        """Why this scenario misses its targets (``direct``: the direct baseline's share
        answered, for a bar relative to it); empty when it passes."""
        reasons = [] if self.requests else ["no request was made"]
        bar, below = self.bar(direct), self.scenario.below_direct
        if below is not None and direct is None:
            reasons.append("no direct baseline measured to compare with")
        elif bar is not None and self.success_rate < bar:
            what = f"{bar:.1%}"
            if below is not None:
                what = f"the direct baseline {direct:.2%} − {below * 100:g} point(s) = {bar:.2%}"
            reasons.append(f"{self.success_rate:.2%} answered, below {what}")
        if self.cooling and not self.scenario.cooling_allowed:
            reasons.append(f"{self.cooling} × {COOLING}")
        if self.scenario.direct and self.rate is not None and self.requests:
            expected = 1.0 - self.rate
            if abs(self.success_rate - expected) > _spread(expected, self.requests):
                what = f"not the {expected:.2%} its faults imply"
                reasons.append(f"the baseline answered {self.success_rate:.2%}, {what}")
        if self.rate is not None and self.requests:
            calls = self.upstream.get("chat", 0)
            if not calls:
                reasons.append("the upstream saw no call: no fault was injected")
            elif abs(self.injected_rate - self.rate) > _spread(self.rate, calls):
                what = f"not the {self.rate:.0%} asked for"
                reasons.append(f"the upstream failed {self.injected_rate:.2%} of its calls, {what}")
        return reasons


def _spread(rate: float, n: int) -> float:
    """How far a binomial share over ``n`` draws may stray from ``rate`` by chance."""
    return SIGMAS * math.sqrt(rate * (1.0 - rate) / n)


def direct_baseline(results: Sequence[ScenarioResult]) -> float | None:
    """The share the direct baseline answered, when the run measured one."""
    return next((r.success_rate for r in results if r.scenario.direct and r.requests), None)


def failures(results: Sequence[ScenarioResult]) -> list[str]:
    """Every scenario that misses its bar, with why; empty when all pass."""
    direct = direct_baseline(results)
    return [f"{r.scenario.name}: {'; '.join(why)}" for r in results if (why := r.failures(direct))]
