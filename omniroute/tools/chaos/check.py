"""The chaos run's availability check, pure: from the injected faults to a verdict per route.

The floor comes from the fault schedule alone, never from what the gateway answered. A direct
client that makes the calls a request can count on (``k`` targets, each call failing with
probability ``p``, ``q`` of it mid-answer) succeeds at
:func:`~omniroute.tools.chaos.faults.success_bound`
``(k, stream)``; the floor is that bound less 3σ of a binomial rate over the requests judged.
Every answer that is not the complete text is a failure, refusals included: a
``503 all_targets_cooling_down``, a ``provider_circuit_open``, a ``429`` from the gateway (as a
status or in-band after a keep-alive) count exactly as an upstream error does.

One kind of request is not judged (*excused*): one issued while the schedule left every target
of its route unavailable for longer than the request could wait, which a direct client could not
have answered either. That is the scheduled outage (every call of one model stalls) with more of
it still to come than the route's wait cap: ``attempts.maxRetryAfterWaitMs`` for a single model,
``comboCooldownWait.maxWaitMs`` for a combo (0 when combo waiting is off), neither beyond the
request's deadline. A scheduled ``Retry-After`` within the cap excuses nothing: a request could
have waited it out. One longer than the cap would excuse the refusals it causes, but counts
cannot tell those apart from others, so such a schedule fails the check instead of passing
unjudged.

``k`` counts the targets whose model the outage spares (a combo of three with one in the
outage: 2; a single model: 1, as its requests during the outage are excused).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from omniroute.tools.chaos import faults
from omniroute.tools.chaos.client import OK

# Answers that are the gateway's own refusal rather than a failed upstream call.
REFUSAL_CODES: Final = frozenset(
    {"all_targets_cooling_down", "provider_circuit_open", "rate_limit_exceeded"}
)


def is_refusal(outcome: str) -> bool:
    """``"<status> <code>"`` or ``"stream <code>"``: a refusal code, or any 429."""
    status, _, code = outcome.partition(" ")
    return status == "429" or code in REFUSAL_CODES


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """What the schedule injects: ``p`` and ``q`` per call, the ``Retry-After`` seconds of its
    429s, and the model whose every call stalls through the outage."""

    p: float
    q: float
    hint_seconds: tuple[float, ...]
    outage_model: str


@dataclass(frozen=True, slots=True)
class WaitCaps:
    """How long a request may wait for a target to come back, in ms."""

    single_ms: int  # attempts.maxRetryAfterWaitMs
    combo_ms: int  # comboCooldownWait.maxWaitMs, 0 when combo waiting is off
    deadline_ms: int  # the request's own deadline

    def for_route(self, combo: bool) -> int:
        return min(self.combo_ms if combo else self.single_ms, self.deadline_ms)


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """A route a client asks for: its name, and the upstream model of each of its targets."""

    name: str
    models: tuple[str, ...]

    @property
    def combo(self) -> bool:
        return len(self.models) > 1


@dataclass(frozen=True, slots=True)
class Sent:
    """One request as the check needs it: how it ended, and how many seconds of the outage
    were still to come when it was issued (0 outside the outage)."""

    outcome: str
    outage_left_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RouteVerdict:
    """One route in one mode: its floor, what was judged and excused, and why it fails."""

    route: RouteSpec
    stream: bool
    targets_counted: int
    bound: float
    floor: float
    judged: Counter[str]
    excused: Counter[str]
    excuse: str  # why the excused requests are excused, or why none is
    reasons: tuple[str, ...] = field(default=())

    @property
    def mode(self) -> str:
        return "stream" if self.stream else "json"

    @property
    def requests(self) -> int:
        return self.judged.total() + self.excused.total()

    @property
    def success(self) -> float:
        """The share of judged requests answered in full."""
        n = self.judged.total()
        return self.judged[OK] / n if n else 0.0

    @property
    def refused(self) -> int:
        return sum(n for k, n in self.judged.items() if is_refusal(k))

    @property
    def passed(self) -> bool:
        return not self.reasons


def _seconds(ms: float) -> str:
    return f"{ms / 1000:g} s"


def _excuse(route: RouteSpec, spec: FaultSpec, cap_ms: int) -> tuple[bool, str]:
    """Whether the outage can excuse this route's requests, and the sentence saying why."""
    kind = "combo wait cap" if route.combo else "single-model wait cap"
    if not all(m == spec.outage_model for m in route.models):
        spared = sum(m != spec.outage_model for m in route.models)
        up = f"{spared} of its {len(route.models)} targets" if route.combo else "its target"
        return False, (
            f"none: {up} stay{'' if route.combo else 's'} up through the outage; "
            f"Retry-After ≤ {_seconds(max(spec.hint_seconds, default=0) * 1000)} is within "
            f"the {kind} of {_seconds(cap_ms)}"
        )
    return True, (
        f"issued with every target in the `{spec.outage_model}` outage and more than the "
        f"{kind} of {_seconds(cap_ms)} of it still to come"
    )


def judge(
    route: RouteSpec,
    stream: bool,
    sent: Iterable[Sent],
    spec: FaultSpec,
    caps: WaitCaps,
    sigmas: float = 3.0,
) -> RouteVerdict:
    """The verdict on one route and mode: pass/fail with reasons, from the fault schedule
    (``spec``, ``caps``) and the observed outcomes (``sent``)."""
    cap_ms = caps.for_route(route.combo)
    may_excuse, excuse = _excuse(route, spec, cap_ms)
    judged: Counter[str] = Counter()
    excused: Counter[str] = Counter()
    for request in sent:
        down_long = request.outage_left_s * 1000 > cap_ms
        (excused if may_excuse and down_long else judged)[request.outcome] += 1
    k = sum(m != spec.outage_model for m in route.models) or len(route.models)
    bound = faults.success_bound(k, stream, spec.p, spec.q)
    floor = bound - faults.margin(bound, judged.total(), sigmas)
    verdict = RouteVerdict(route, stream, k, bound, floor, judged, excused, excuse)
    reasons = []
    where = f"{route.name} ({verdict.mode})"
    if judged and verdict.success < floor:
        refused = verdict.refused / judged.total()
        reasons.append(
            f"{where}: {verdict.success:.2%} answered, below the floor of {floor:.2%} "
            f"(direct-client bound {bound:.2%} − {sigmas:g}σ); {refused:.2%} refused by the "
            "gateway, counted as failures"
        )
    if long := [h for h in spec.hint_seconds if h * 1000 > cap_ms]:
        reasons.append(
            f"{where}: the schedule's Retry-After of {_seconds(max(long) * 1000)} exceeds the "
            f"route's wait cap of {_seconds(cap_ms)}; the refusals it causes cannot be told "
            "from others, so the route cannot be judged"
        )
    return RouteVerdict(route, stream, k, bound, floor, judged, excused, excuse, tuple(reasons))
