"""``/metrics`` after a scripted run through a real gateway process and the fake upstream:
every labelled family counts exactly what the run did, per provider (each scenario has a
provider of its own, so the session's other tests never add to its series)."""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.wire import PROMPT_TOKENS, content, tokens
from tests.e2e.conftest import Gateway, Route, make_route

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "x"}]
PINGING = {"stall": "before", "heartbeat_ms": 300}  # a head, pings, never a token
HEALTHY = {"chunks": 4, "chunk_size": 8}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# A model no catalog entry or combo names, whatever other modules did to the shared gateway:
# its series carry the model label "other".
UNNAMED = f"unnamed-{secrets.token_hex(4)}"


def ask(gateway: Gateway, route: Route, model: str | None = None, stream: bool = False) -> Any:
    body = {"model": model or route.model(UNNAMED), "stream": stream, "messages": MESSAGES}
    with gateway.client(route.key, timeout=30) as client:
        response = client.post("/chat/completions", json=body)
        response.read()
        return response


def scrape(gateway: Gateway) -> Samples:
    text = httpx.get(f"{gateway.url}/metrics", timeout=10).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def of(samples: Samples, name: str, provider: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples called ``name`` of ``provider``, by their other labels."""
    return {
        frozenset((k, v) for k, v in labels if k not in ("provider", "le")): value
        for (found, labels), value in samples.items()
        if found == name and ("provider", provider) in labels and ("le", "+Inf") not in labels
    }


def counted(samples: Samples, provider: str) -> float:
    return sum(of(samples, "omniroute_requests_total", provider).values())


def settled(gateway: Gateway, done: Callable[[Samples], bool]) -> Samples:
    """The metrics once ``done`` holds of them (a request is counted just after its answer
    went out), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        samples = scrape(gateway)
        if done(samples) or time.monotonic() > deadline:
            return samples


def labels(**given: str) -> frozenset[tuple[str, str]]:
    return frozenset(given.items())


@pytest.fixture
def settings(gateway: Gateway) -> Iterator[Any]:
    """Patch the resilience settings for the test; put them back after."""
    before = gateway.api.get("/api/resilience").json()
    changed: list[str] = []

    def patch(change: dict[str, Any]) -> None:
        changed.extend(change)
        response = gateway.api.patch("/api/resilience", json=change)
        assert response.status_code == 200, response.text

    yield patch
    if changed:
        gateway.api.patch("/api/resilience", json={name: before[name] for name in changed})


def test_successes_are_counted_per_provider_and_status(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    for _ in range(3):
        assert ask(gateway, route).status_code == 200

    samples = settled(gateway, lambda found: counted(found, route.provider) >= 3)

    ok = labels(endpoint="/v1/chat/completions", model="other", status="200", status_class="2xx")
    assert of(samples, "omniroute_requests_total", route.provider) == {ok: 3}
    assert of(samples, "omniroute_upstream_attempts_total", route.provider) == {
        labels(outcome="success"): 3
    }
    assert of(samples, "omniroute_upstream_attempt_results_total", route.provider) == {
        labels(model="other", result="success"): 3
    }
    duration = of(samples, "omniroute_request_duration_seconds_count", route.provider)
    assert duration == {labels(endpoint="/v1/chat/completions", model="other"): 3}
    connections = of(samples, "omniroute_provider_connections", route.provider)
    assert connections == {
        labels(state="available"): 1,
        labels(state="cooling"): 0,
        labels(state="terminal"): 0,
    }


def test_a_fail_over_counts_the_retry_the_move_and_the_success(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # given: the first connection answers 503 (retried once on it), the second serves
    route = make_route(gateway, fake, {"status": 503}, {})

    assert ask(gateway, route).status_code == 200

    samples = settled(gateway, lambda found: counted(found, route.provider) >= 1)
    assert of(samples, "omniroute_upstream_attempt_results_total", route.provider) == {
        labels(model="other", result="retried"): 1,
        labels(model="other", result="failed_over"): 1,
        labels(model="other", result="success"): 1,
    }
    assert of(samples, "omniroute_upstream_attempts_total", route.provider) == {
        labels(outcome="http_error"): 2,
        labels(outcome="success"): 1,
    }


def test_a_hedge_and_the_time_to_first_token_of_a_stream(
    gateway: Gateway, fake: FakeUpstream, settings: Any
) -> None:
    settings({"attempts": {"hedgeAfterMs": 1_000}})
    route = make_route(gateway, fake, PINGING, HEALTHY)

    response = ask(gateway, route, stream=True)

    assert response.status_code == 200 and "hedge=1" in response.headers["x-omniroute-decision"]
    samples = settled(gateway, lambda found: counted(found, route.provider) >= 1)
    # the hedge started, and won (the slow loser, cancelled, is no attempt of the request)
    assert of(samples, "omniroute_upstream_attempt_results_total", route.provider) == {
        labels(model="other", result="hedged"): 1,
        labels(model="other", result="success"): 1,
    }
    first_token = of(samples, "omniroute_time_to_first_token_seconds_count", route.provider)
    assert first_token == {labels(endpoint="/v1/chat/completions", model="other"): 1}
    [took] = of(samples, "omniroute_time_to_first_token_seconds_sum", route.provider).values()
    assert took >= 0.9  # the hedge started after its 1 s delay


def test_a_locked_model_is_counted_and_shown_as_a_gauge(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    route = make_route(gateway, fake)
    fake.script({"status": 429, "retry_after": 30})
    assert ask(gateway, route, route.model("model-a")).status_code == 429
    assert ask(gateway, route, route.model("model-a")).status_code == 503  # locked

    samples = settled(gateway, lambda found: counted(found, route.provider) >= 2)
    results = of(samples, "omniroute_upstream_attempt_results_total", route.provider)
    assert results == {
        labels(model="other", result="failed"): 1,
        labels(model="other", result="locked"): 1,
    }
    locked = of(samples, "omniroute_provider_locked_models", route.provider)
    assert locked == {frozenset(): 1}
    unlock = {"provider": route.provider, "model": "model-a"}
    assert gateway.api.request("DELETE", "/api/resilience/model-cooldowns", json=unlock).is_success


def test_an_open_breaker_is_a_gauge_of_its_provider(
    gateway: Gateway, fake: FakeUpstream, settings: Any
) -> None:
    # given: a local provider whose breaker opens at the second failure, no retries
    settings(
        {
            "providerBreaker": {
                "local": {
                    "failureThreshold": 2,
                    "degradationThreshold": 1,
                    "resetTimeoutMs": 60_000,
                }
            },
            "attempts": {"retriesPerTarget": 0},
        }
    )
    route = make_route(gateway, fake, {"status": 503}, {"status": 503}, category="local")
    five = labels(endpoint="/v1/chat/completions", model="other", status="503", status_class="5xx")
    before = of(scrape(gateway), "omniroute_requests_total", "none").get(five, 0)
    for _ in range(3):
        assert ask(gateway, route).status_code == 503

    samples = settled(
        gateway,
        lambda found: (
            counted(found, route.provider) >= 2
            and of(found, "omniroute_requests_total", "none").get(five, 0) > before
        ),
    )

    assert of(samples, "omniroute_breaker_state", route.provider) == {
        labels(state="closed"): 0,
        labels(state="degraded"): 0,
        labels(state="half_open"): 0,
        labels(state="open"): 1,
    }
    assert of(samples, "omniroute_requests_total", route.provider) == {five: 2}
    refused = of(samples, "omniroute_requests_total", "none")
    assert refused[five] == before + 1  # the third: refused by the open breaker, no attempt


def test_unknown_model_names_share_one_series(gateway: Gateway, fake: FakeUpstream) -> None:
    route = make_route(gateway, fake)
    names = [route.model(f"unknown-{n}") for n in range(40)]
    for name in names:
        assert ask(gateway, route, name).status_code == 200

    samples = settled(gateway, lambda found: counted(found, route.provider) >= len(names))

    ok = labels(endpoint="/v1/chat/completions", model="other", status="200", status_class="2xx")
    assert of(samples, "omniroute_requests_total", route.provider) == {ok: len(names)}
    series = [labels for (_, labels) in samples if ("provider", route.provider) in labels]
    assert not any(name in str(series) for name in names)


def logged_tokens(gateway: Gateway, provider: str) -> list[tuple[int | None, int | None]]:
    """The tokens of ``provider``'s requests in the request log, once one is there (its
    background writer batches them), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        rows = gateway.api.get("/api/requests/", params={"provider": provider}).json()["results"]
        if rows or time.monotonic() > deadline:
            return [(row["tokens_in"], row["tokens_out"]) for row in rows]
        time.sleep(0.05)  # between polls of the condition, not a wait for a result


def test_every_stream_dialect_counts_its_tokens_in_the_metrics_and_the_request_log(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    # given: one provider per client API, each streaming the same answer
    chat, responses = make_route(gateway, fake, HEALTHY), make_route(gateway, fake, HEALTHY)
    messages = make_route(gateway, fake, HEALTHY, wire_format="anthropic")
    expected = (PROMPT_TOKENS, tokens(len(content(HEALTHY["chunks"] * HEALTHY["chunk_size"]))))

    # when: each streams through its SDK, none asking for usage
    asked: Any = MESSAGES
    stream = openai_sdk(gateway, chat).chat.completions.create(
        model=chat.model(UNNAMED), messages=asked, stream=True
    )
    assert all(chunk.usage is None for chunk in stream)
    list(
        openai_sdk(gateway, responses).responses.create(
            model=responses.model(UNNAMED), input="x", stream=True
        )
    )
    sdk = anthropic.Anthropic(base_url=gateway.url, api_key=messages.key, max_retries=0)
    model = messages.model(UNNAMED)
    with sdk.messages.stream(model=model, max_tokens=64, messages=asked) as events:
        events.get_final_text()

    # then
    for route in (chat, responses, messages):
        samples = settled(gateway, functools.partial(tokens_counted, provider=route.provider))
        assert of(samples, "omniroute_tokens_total", route.provider) == {
            labels(direction="in", model="other"): expected[0],
            labels(direction="out", model="other"): expected[1],
        }
        assert logged_tokens(gateway, route.provider) == [expected]


def tokens_counted(samples: Samples, provider: str) -> bool:
    return bool(of(samples, "omniroute_tokens_total", provider))


def openai_sdk(gateway: Gateway, route: Route) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=route.key, max_retries=0)
