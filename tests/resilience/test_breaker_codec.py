"""Pure tests of the breaker's outward forms: JSON round trip and tolerant decoding, the
status object, and the domain module's stdlib-only imports.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from resilience.domain.breaker import machine as breaker_module
from resilience.domain.breaker.machine import Breaker, FailureKind
from tests.resilience.breaker_support import API, OAUTH, OPEN, T0, failed, opened, probing

# -- serialisation -----------------------------------------------------------------------------


def test_round_trip_through_json() -> None:
    breaker, _ = probing(API, failed(API, 12, kind=FailureKind.RATE_LIMIT), T0 + 30)
    data = json.loads(json.dumps(breaker.to_dict()))
    assert Breaker.from_dict(data) == breaker
    assert data["state"] == "half_open" and data["last_failure_kind"] == "rate_limit"


def test_half_open_restore_refills_the_probe_slots() -> None:
    data = {"state": "half_open", "half_open_allowed": 0, "probe_started_at": None}
    assert Breaker.from_dict(data).half_open_allowed == 1
    assert Breaker.from_dict(data, half_open_requests=3).half_open_allowed == 3
    in_flight = {**data, "probe_started_at": T0}
    assert Breaker.from_dict(in_flight).half_open_allowed == 0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, Breaker()),
        ({"state": "tripped", "surprise": 1}, Breaker()),
        ({"state": "open", "failure_count": "many"}, Breaker(state=OPEN)),
        ({"last_failure_kind": "teapot", "last_failure_at": "yesterday"}, Breaker()),
        ({"failure_count": -3, "open_cycle_count": True}, Breaker()),
        (
            {"kind_failure_counts": {"rate_limit": 2, "x": "y"}},
            Breaker(kind_failure_counts={"rate_limit": 2}),
        ),
        ({"transitions": [{"from": "closed"}, "junk", 7]}, Breaker()),
        (
            {"last_failure_at": T0, "failure_count": 2.0},
            Breaker(failure_count=2, last_failure_at=T0),
        ),
    ],
)
def test_from_dict_tolerates_bad_input(data: dict[str, object], expected: Breaker) -> None:
    assert Breaker.from_dict(data) == expected


# -- status ------------------------------------------------------------------------------------


def test_status_of_an_open_breaker() -> None:
    breaker = failed(API, 12, kind=FailureKind.TRANSIENT)
    assert breaker.status(API, T0 + 10.5) == {
        "state": "open",
        "failureCount": 12,
        "lastFailureTime": int(T0 * 1000),
        "retryAfterMs": 19_500,
        "lastFailureKind": "transient",
        "openCycleCount": 0,
        "kindFailureCounts": {"transient": 12},
        "degradationThreshold": 7,
        "effectiveResetTimeout": 30_000,
        "transitionHistory": [
            {
                "from": "closed",
                "to": "degraded",
                "timestamp": int(T0 * 1000),
                "failureCount": 7,
                "reason": "degraded",
            },
            {
                "from": "degraded",
                "to": "open",
                "timestamp": int(T0 * 1000),
                "failureCount": 12,
                "reason": "threshold",
            },
        ],
    }


def test_status_of_a_fresh_breaker() -> None:
    status = Breaker().status(OAUTH, T0)
    assert (status["state"], status["retryAfterMs"], status["lastFailureTime"]) == (
        "closed",
        0,
        None,
    )
    assert (status["degradationThreshold"], status["effectiveResetTimeout"]) == (5, 60_000)
    assert status["transitionHistory"] == []


def test_status_while_a_probe_is_in_flight() -> None:
    breaker, _ = probing(OAUTH, opened(OAUTH), T0 + 60)
    status = breaker.status(OAUTH, T0 + 75)
    assert (status["state"], status["retryAfterMs"]) == ("half_open", 45_000)


# -- purity ------------------------------------------------------------------------------------


def test_breaker_module_imports_only_the_stdlib_and_the_domain() -> None:
    tree = ast.parse(Path(breaker_module.__file__).read_text())
    modules = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    outside = {m for m in modules if m.split(".")[0] not in sys.stdlib_module_names}
    assert all(m.startswith("resilience.domain.") for m in outside), outside
