"""The chaos run's availability check itself (pure): synthetic runs with made-up counts.

The floor must come from the injected faults alone, so a run in which the gateway refuses a
share of the requests that a direct client would have had answered fails, however the refusals
are spelled; only a schedule that left every target down longer than a request could wait
excuses requests, and those are shown apart.
"""

from __future__ import annotations

from collections import Counter

import pytest

from omniroute.tools.chaos import faults
from omniroute.tools.chaos.check import FaultSpec, RouteSpec, Sent, WaitCaps, is_refusal, judge
from omniroute.tools.chaos.client import OK, Verdict
from omniroute.tools.chaos.report import failures, fault_spec, report, section
from omniroute.tools.chaos.run import (
    ChaosPlan,
    ChaosResult,
    LoadOutcome,
    Observations,
    Route,
    wait_caps,
)

SPEC = FaultSpec(faults.FAULT_RATE, faults.MID_RATE, (1.0,), "alpha")
CAPS = WaitCaps(single_ms=5_000, combo_ms=90_000, deadline_ms=15_000)
SOLO = RouteSpec("single solo", ("solo",))
COMBO = RouteSpec("combo priority", ("alpha", "beta", "gamma"))
ON_DOWN = RouteSpec("single alpha", ("alpha",))
COOLING = "503 all_targets_cooling_down"


def run(counts: dict[str, int], outage_left_s: float = 0.0) -> list[Sent]:
    """Made-up requests: ``counts`` by outcome, all issued with ``outage_left_s`` to come."""
    return [Sent(k, outage_left_s) for k, n in counts.items() for _ in range(n)]


def direct(route: RouteSpec, stream: bool, n: int = 1000) -> dict[str, int]:
    """What a direct client gets: the bound's share answered, the rest upstream errors."""
    k = sum(m != SPEC.outage_model for m in route.models) or 1
    ok = round(n * faults.success_bound(k, stream, SPEC.p, SPEC.q))
    return {OK: ok, "503 server_error": n - ok}


@pytest.mark.parametrize("route", [SOLO, COMBO])
@pytest.mark.parametrize("stream", [False, True])
def test_a_run_matching_the_direct_client_passes(route: RouteSpec, stream: bool) -> None:
    verdict = judge(route, stream, run(direct(route, stream)), SPEC, CAPS)
    assert verdict.passed, verdict.reasons
    assert verdict.excused.total() == 0 and verdict.judged.total() == 1000


@pytest.mark.parametrize("route", [SOLO, COMBO])
@pytest.mark.parametrize("stream", [False, True])
def test_a_run_with_30_percent_refused_fails(route: RouteSpec, stream: bool) -> None:
    # The direct client's errors stay as they were; 30 % of the requests are refused instead
    # of answered.
    counts = direct(route, stream)
    counts[OK] -= 300
    counts[COOLING] = 300
    verdict = judge(route, stream, run(counts), SPEC, CAPS)
    assert not verdict.passed
    assert verdict.refused == 300
    assert "30.00% refused by the gateway, counted as failures" in verdict.reasons[0]


REFUSALS = [
    COOLING,
    "503 provider_circuit_open",
    "429 rate_limit_exceeded",
    "stream all_targets_cooling_down",
]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_run_with_every_request_refused_fails(refusal: str) -> None:
    assert is_refusal(refusal)
    for route in (SOLO, COMBO):
        verdict = judge(route, False, run({refusal: 1000}), SPEC, CAPS)
        assert not verdict.passed and verdict.success == 0.0


def test_the_floor_does_not_move_with_what_was_refused() -> None:
    floors = [
        judge(SOLO, False, run({OK: 500, COOLING: n, "504 t": 500 - n}), SPEC, CAPS).floor
        for n in (0, 100, 500)
    ]
    assert floors == [pytest.approx(0.75 - 3 * (0.75 * 0.25 / 1000) ** 0.5)] * 3
    assert not is_refusal("503 server_error") and not is_refusal(OK)


def test_only_a_route_with_every_target_down_longer_than_it_can_wait_is_excused() -> None:
    long, short = 6.0, 4.0  # seconds of the outage still to come; the single cap is 5 s
    sent = run({COOLING: 100}, long) + run({COOLING: 50}, short) + run(direct(ON_DOWN, False))
    verdict = judge(ON_DOWN, False, sent, SPEC, CAPS)
    assert verdict.excused == Counter({COOLING: 100})
    assert verdict.judged[COOLING] == 50 and verdict.judged.total() == 1050
    assert "every target in the `alpha` outage" in verdict.excuse
    # A combo keeps two targets through the outage: nothing of it is excused.
    combo = judge(COMBO, False, run({COOLING: 100}, 60.0) + run(direct(COMBO, False)), SPEC, CAPS)
    assert combo.excused.total() == 0 and not combo.passed
    assert combo.excuse.startswith("none: 2 of its 3 targets stay up")


def test_a_combo_waits_no_longer_than_its_deadline() -> None:
    waits = WaitCaps(single_ms=5_000, combo_ms=90_000, deadline_ms=15_000)
    assert waits.for_route(combo=True) == 15_000 and waits.for_route(combo=False) == 5_000
    alpha_only = RouteSpec("combo of alpha", ("alpha", "alpha"))
    verdict = judge(
        alpha_only, False, run({COOLING: 10}, 20.0) + run({COOLING: 10}, 10.0), SPEC, waits
    )
    assert verdict.excused.total() == 10 and verdict.judged.total() == 10


def test_a_hint_longer_than_the_wait_cap_cannot_be_judged() -> None:
    hinted = FaultSpec(SPEC.p, SPEC.q, (7.0,), "alpha")
    verdict = judge(SOLO, False, run(direct(SOLO, False)), hinted, CAPS)
    assert not verdict.passed
    assert "Retry-After of 7 s exceeds the route's wait cap of 5 s" in verdict.reasons[0]
    assert judge(COMBO, False, run(direct(COMBO, False)), hinted, CAPS).passed  # 7 s ≤ 15 s


def test_the_run_reads_its_faults_and_wait_caps_from_its_inputs() -> None:
    assert fault_spec() == FaultSpec(faults.FAULT_RATE, faults.MID_RATE, (1.0,), "alpha")
    document = {
        "attempts": {"maxRetryAfterWaitMs": 5000},
        "comboCooldownWait": {"enabled": True, "maxWaitMs": 90000, "maxAttempts": 5},
    }
    assert wait_caps(document, 15_000) == WaitCaps(5000, 90000, 15_000)
    document["comboCooldownWait"]["enabled"] = False
    assert wait_caps(document, 15_000).combo_ms == 0


def result(counts: dict[str, int]) -> ChaosResult:
    """A whole made-up chaos run: every request on ``single solo`` (JSON), issued at 100 s in
    the middle of the outage (which spares ``solo``); everything else as a passing run."""
    route = Route("single solo", "s/solo", ("solo",))
    load = LoadOutcome()
    for outcome, n in counts.items():
        for _ in range(n):
            load.add(route, False, Verdict(outcome), issued_at=100.0)
    seen = Observations(breakers={"chaos-a-x": ["closed", "open", "closed"]})
    seen.store_degraded_seen = True
    outage = (90.0, 110.0)
    plan = ChaosPlan(requests=sum(counts.values()))
    return ChaosResult(
        plan,
        [route],
        load,
        {"chat": 1},
        Counter(),
        "digest",
        seen,
        1.0,
        Counter(),
        {},
        {},
        0,
        [],
        CAPS,
        outage,
    )


def test_the_run_fails_on_the_check_and_reports_the_refusals() -> None:
    assert failures(result(direct(SOLO, False))) == []
    refused = direct(SOLO, False)
    refused[OK] -= 300
    refused[COOLING] = 300
    reasons = failures(result(refused))
    assert len(reasons) == 1 and reasons[0].startswith("single solo (json): 45.00% answered")
    table = report(result(refused))
    assert "| single solo | json | 1000 | 0 | 450 |" in table and "| 30.00% |" in table
    assert "- single solo: 0 excused; none: its target stays up through the outage" in table
    assert "FAIL" in section(result(refused), "## chaos", "now")
