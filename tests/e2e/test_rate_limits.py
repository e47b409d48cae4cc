"""A real rate limit, through real HTTP: every call to a model answers
``429 Retry-After: 2`` for 10 s, then it is healthy again, while 8 clients send requests one
after another for 20 s.

* With one connection, every request is answered (the ones that arrive during the limit wait
  for it to end), and the upstream sees about one attempt per 2 s during the limit: the
  requests in flight when it began, then one probe per hint period, never a hammering.
* With a second connection serving the same model, every request is answered by it at once.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator

import pytest

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.fakeupstream.behaviour import RequestRecord
from tests.e2e.conftest import Gateway, make_route, records

pytestmark = pytest.mark.e2e

CLIENTS = 8
RUN_SECONDS = 20.0
LIMIT_SECONDS = 10.0
HINT_SECONDS = 2
FAST = {"chunk_size": 8, "chunks": 1}
Result = tuple[float, float, int]  # sent, answered (monotonic), status


def load(gateway: Gateway, key: str, model: str, seconds: float = RUN_SECONDS) -> list[Result]:
    """``CLIENTS`` clients asking for ``model`` one request after another for ``seconds``."""
    results: list[Result] = []
    guard = threading.Lock()
    stop_at = time.monotonic() + seconds
    body = {"model": model, "messages": [{"role": "user", "content": "x"}]}

    def client() -> None:
        with gateway.client(key, timeout=60) as http:
            while time.monotonic() < stop_at:
                sent = time.monotonic()
                status = http.post("/chat/completions", json=body).status_code
                with guard:
                    results.append((sent, time.monotonic(), status))

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=RUN_SECONDS + 120)
    return results


@pytest.fixture
def patient(gateway: Gateway) -> Iterator[None]:
    """Enough waits for a 10 s limit of 2 s hints (the default five are just enough; the test
    is about the upstream's load and the answers, not that margin)."""
    before = gateway.api.get("/api/resilience").json()["comboCooldownWait"]
    patch = {"comboCooldownWait": {"maxAttempts": 10}}
    assert gateway.api.patch("/api/resilience", json=patch).status_code == 200
    yield
    gateway.api.patch("/api/resilience", json={"comboCooldownWait": before})


def limited(fake: FakeUpstream, model: str, seen: list[RequestRecord]) -> threading.Timer:
    """``model`` answers 429 with a 2 s hint from now, for ``LIMIT_SECONDS``; then ``seen``
    gets the fake's records of that time (its log keeps only the last thousand requests)."""
    fake.set_model(model, status=429, retry_after=HINT_SECONDS)

    def heal() -> None:
        fake.set_model(model)
        seen.extend(r for r in fake.requests if r.model == model)

    timer = threading.Timer(LIMIT_SECONDS, heal)
    timer.start()
    return timer


@pytest.mark.usefixtures("patient")
def test_one_connection_waits_out_a_real_limit_without_hammering_it(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    model = f"limited-{secrets.token_hex(3)}"
    route = make_route(gateway, fake, FAST)
    seen: list[RequestRecord] = []
    began = time.monotonic()
    limit = limited(fake, model, seen)

    results = load(gateway, route.key, f"{route.provider}/{model}")
    limit.join()

    statuses = [status for _, _, status in results]
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    # the requests in flight when the limit began, then about one probe per hint period
    assert CLIENTS <= len(seen) <= CLIENTS + LIMIT_SECONDS / HINT_SECONDS + 3, len(seen)
    # nothing can be answered during the limit: those requests waited it out
    assert min(answered for _, answered, _ in results) >= began + LIMIT_SECONDS


def test_a_second_connection_answers_every_request_without_waiting(
    gateway: Gateway, fake: FakeUpstream
) -> None:
    slow = {**FAST, "latency_ms": 100}  # under a thousand requests: the fake's log keeps them
    route = make_route(gateway, fake, {**slow, "status": 429, "retry_after": HINT_SECONDS}, slow)
    model = route.model(f"both-{secrets.token_hex(3)}")

    results = load(gateway, route.key, model, seconds=LIMIT_SECONDS)

    assert [status for _, _, status in results].count(200) == len(results) > 0
    slowest = max(answered - sent for sent, answered, _ in results)
    assert slowest < HINT_SECONDS / 2, slowest  # nobody waited for a hint
    assert len(records(fake, route, 1)) <= CLIENTS + LIMIT_SECONDS / HINT_SECONDS + 3
    assert len(records(fake, route, 2)) == len(results)  # the second answered every one
