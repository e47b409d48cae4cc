"""The combo cooldown-aware wait through real HTTP: a
combo whose every target answered a short upstream-hinted 429 waits for the
first to come back and answers 200; a quota 429 is never waited for; targets excluded by long
upstream timers get the 503 ``all_targets_cooling_down`` without an upstream call.

The gateway runs in its own process, whose clock cannot be injected: the first test waits out
the upstream's real 2 s ``Retry-After``, with generous bounds.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson
import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, records

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]
HINT_SECONDS = 2
# The attempt policy would wait a 2 s hint out on the same target;
# these combos switch that off so that what is proved is the combo's own wait (step 3).
NO_SAME_TARGET_WAIT = {"maxRetryAfterWaitMs": 0}
DAILY_QUOTA = orjson.dumps(
    {
        "error": {
            "message": "Daily quota exceeded for this model. Try again tomorrow.",
            "type": "rate_limit_error",
            "code": "rate_limit_exceeded",
        }
    }
).decode()


def combo_of_two(
    gateway: Gateway, fake: FakeUpstream, overrides: dict[str, int] | None = None
) -> tuple[Route, Route, str, str]:
    """Two providers (one connection each) in a priority combo over their model ``m``; the
    combo's name and a key for it."""
    first, second = make_route(gateway, fake), make_route(gateway, fake)
    name = f"wait-{first.provider}"
    targets = [{"provider": route.provider, "model": "m"} for route in (first, second)]
    gateway.post(
        "/api/combos/",
        {
            "name": name,
            "strategy": "priority",
            "targets": targets,
            "attempt_overrides": overrides or {},
        },
    )
    key = gateway.post("/api/keys/", {"name": name, "allowed_models": [name]})["key"]
    return first, second, name, key


def timed(gateway: Gateway, key: str, model: str) -> tuple[httpx.Response, float]:
    body: dict[str, Any] = {"model": model, "messages": MESSAGES}
    with gateway.client(key, timeout=30) as client:
        started = time.monotonic()
        response = client.post("/chat/completions", json=body)
        return response, time.monotonic() - started


def calls(fake: FakeUpstream, first: Route, second: Route) -> list[str]:
    """Which provider each upstream call of these two routes went to, in order."""
    seen = [(r.at, "first") for r in records(fake, first)]
    seen += [(r.at, "second") for r in records(fake, second)]
    return [who for _, who in sorted(seen)]


def test_both_targets_hinted_for_2_s_wait_and_then_answer_200(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    first, second, combo, key = combo_of_two(gateway, fake, NO_SAME_TARGET_WAIT)
    limited = {"status": 429, "retry_after": HINT_SECONDS}
    fake.script(limited, limited)  # then the connections' own scenario: a 200

    response, elapsed = timed(gateway, key, combo)

    assert response.status_code == 200, response.text
    assert 1.5 <= elapsed < 10
    assert calls(fake, first, second) == ["first", "second", "first"]
    retried = records(fake, first)
    assert retried[1].at - retried[0].at >= HINT_SECONDS - 0.1  # after the hint, not before
    assert "attempts=3" in response.headers["x-omniroute-decision"]


def test_a_streaming_client_gets_its_first_bytes_before_the_wait(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    first, second, combo, key = combo_of_two(gateway, fake, NO_SAME_TARGET_WAIT)
    limited = {"status": 429, "retry_after": HINT_SECONDS}
    fake.script(limited, limited)
    body = {"model": combo, "messages": MESSAGES, "stream": True}

    with gateway.client(key, timeout=30) as client:
        started = time.monotonic()
        with client.stream("POST", "/chat/completions", json=body) as response:
            parts = response.iter_bytes()
            head = next(parts)
            first_byte = time.monotonic() - started
            rest = b"".join(parts)
        elapsed = time.monotonic() - started

    assert (response.status_code, response.headers["content-type"]) == (200, "text/event-stream")
    assert head.startswith(b": keep-alive\n\n") and first_byte < 1.0
    assert 1.5 <= elapsed < 10
    assert (head + rest).rstrip().endswith(b"data: [DONE]")
    assert calls(fake, first, second) == ["first", "second", "first"]


@pytest.mark.parametrize(
    "hint", [pytest.param(HINT_SECONDS, id="with-retry-after"), pytest.param(None, id="no-hint")]
)
def test_a_quota_429_is_never_waited_for(
    gateway: Gateway, fake: FakeUpstream, hint: int | None
) -> None:
    first, second, combo, key = combo_of_two(gateway, fake)  # the default attempt policy
    quota: dict[str, Any] = {"status": 429, "body": DAILY_QUOTA}
    if hint is not None:
        quota["retry_after"] = hint
    fake.script(quota, quota)  # a wait would be answered 200 by the scenario: caught below

    response, elapsed = timed(gateway, key, combo)

    assert response.status_code == 429, response.text
    assert elapsed < 1.0
    assert calls(fake, first, second) == ["first", "second"]


def test_targets_behind_long_upstream_timers_get_the_503_without_an_upstream_call(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    first, second, combo, key = combo_of_two(gateway, fake)
    long = {"status": 429, "retry_after": 200}  # beyond comboCooldownWait.maxWaitMs (90 s)
    fake.script(long, long)
    locking, _ = timed(gateway, key, combo)
    assert locking.status_code == 429
    assert len(calls(fake, first, second)) == 2

    refused, elapsed = timed(gateway, key, combo)

    assert refused.status_code == 503 and elapsed < 1.0
    assert len(calls(fake, first, second)) == 2  # nothing reached the upstream
    body = refused.json()
    assert body["error"]["code"] == "all_targets_cooling_down"
    assert body["error"]["type"] == "service_unavailable"
    message = body["error"]["message"]
    assert message.startswith(
        "Service temporarily unavailable: every target in this combo is "
        f"cooling down ({first.provider}/m: model_lockout ("
    )
    retry_after = int(refused.headers["retry-after"])
    assert 190 <= retry_after <= 200
    recovery = {"action": "wait", "next_step": "retry later", "retry_after_seconds": retry_after}
    assert body["recovery_hint"] == recovery
    assert body["diagnostics"] == {
        "poolSize": 2,
        "attempted": 0,
        "excluded": [
            {"provider": first.provider, "model": "m", "reason": "model_lockout"},
            {"provider": second.provider, "model": "m", "reason": "model_lockout"},
        ],
        "attemptOrder": [],
        "terminalReason": "all_targets_cooling_down",
        "recovery": recovery,
    }
    assert refused.headers["x-omniroute-combo-terminal-reason"] == "all_targets_cooling_down"
    assert refused.headers["x-omniroute-recovery-action"] == "wait"
    assert refused.headers["x-omniroute-retry-after-seconds"] == str(retry_after)
