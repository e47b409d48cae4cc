"""The request log of a real gateway: requests that succeed, fail over, are refused or fail
all land in the log with the right fields and decision trails, read back through
``/api/requests/``; and an operator opens a failed-over request's page in a browser and sees
its trail."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, make_route, prepare_gateway, serving
from tests.e2e.dashboard_support import create_admin, log_in

pytestmark = pytest.mark.e2e

WAIT_SECONDS = 20
POLL_SECONDS = 0.05
PROMPT = [{"role": "user", "content": "prompt-text-that-must-never-be-logged"}]


@pytest.fixture(scope="module")
def logging_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    env, manage_key = prepare_gateway(tmp_path_factory.mktemp("request-log"))
    create_admin(env)
    with serving(env, manage_key) as gateway:
        yield gateway


def ask(gateway: Gateway, key: str, model: str, stream: bool = False) -> httpx.Response:
    body: dict[str, Any] = {"model": model, "stream": stream, "messages": PROMPT}
    with gateway.client(key) as client:
        response = client.post("/chat/completions", json=body)
        response.read()
        return response


def logged(gateway: Gateway, responses: list[httpx.Response]) -> list[dict[str, Any]]:
    """The log's rows of these requests, once the gateway's writer has written them all (at
    most ``WAIT_SECONDS``)."""
    ids = [r.headers["x-omniroute-request-id"] for r in responses]
    deadline = time.monotonic() + WAIT_SECONDS
    rows: dict[str, dict[str, Any]] = {}
    while True:
        for request_id in set(ids) - rows.keys():
            answer = gateway.api.get(f"/api/requests/{request_id}/")
            if answer.status_code == 200:
                rows[request_id] = answer.json()
        if len(rows) == len(ids) or time.monotonic() > deadline:
            break
        time.sleep(POLL_SECONDS)  # between polls of the condition, not a wait for a result
    assert sorted(rows) == sorted(ids), "requests missing from the log"
    return [rows[request_id] for request_id in ids]


def _steps(row: dict[str, Any]) -> list[tuple[str, int, str, int | None]]:
    return [(s["kind"], s["connection_id"], s["outcome"], s["status"]) for s in row["trail"]]


def _error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


def test_every_request_lands_in_the_log_with_its_fields_and_trail(
    logging_gateway: Gateway, fake: FakeUpstream
) -> None:
    # given: a healthy route, one whose first connection resets, one whose only one does
    gateway = logging_gateway
    healthy = make_route(gateway, fake, {})
    failing_over = make_route(gateway, fake, {"reset": "before"}, {})
    broken = make_route(gateway, fake, {"reset": "before"})
    limited = make_route(gateway, fake, {"status": 429, "retry_after": 60})

    # when
    served = [ask(gateway, healthy.key, healthy.model()) for _ in range(3)]
    streamed = ask(gateway, healthy.key, healthy.model(), stream=True)
    moved = ask(gateway, failing_over.key, failing_over.model())
    refused = ask(gateway, healthy.key, failing_over.model())  # not a model this key may use
    failed = ask(gateway, broken.key, broken.model())
    limited_first = ask(gateway, limited.key, limited.model())  # its Retry-After locks the model
    held_back = ask(gateway, limited.key, limited.model())

    # then
    answers = [*served, streamed, moved, refused, failed, held_back, limited_first]
    assert [r.status_code for r in answers] == [200, 200, 200, 200, 200, 403, 502, 503, 429]
    rows = logged(gateway, answers)
    for row in rows[:4]:
        _served_by(row, healthy, 0)
        assert _steps(row) == [("tried", healthy.connections[0], "success", 200)]
    assert all(row["tokens_in"] and row["tokens_out"] for row in rows[:3])  # from the usage block
    assert rows[3]["time_to_first_token_ms"] is not None
    assert rows[3]["time_to_first_token_ms"] <= rows[3]["latency_ms"]
    _served_by(rows[4], failing_over, 1)
    assert _steps(rows[4]) == [
        ("tried", failing_over.connections[0], "network_error", None),
        ("tried", failing_over.connections[1], "success", 200),
    ]
    assert rows[5]["status"] == 403 and rows[5]["trail"] == [] and rows[5]["provider"] == ""
    assert rows[5]["error_code"] == _error_code(refused)
    assert rows[6]["status"] == 502 and rows[6]["provider"] == ""
    assert rows[6]["error_code"] == _error_code(failed) == "upstream_unreachable"
    assert set(_steps(rows[6])) == {("tried", broken.connections[0], "network_error", None)}
    assert rows[7]["error_code"] == _error_code(held_back) == "all_targets_cooling_down"
    assert rows[7]["attempts"] == 0
    completion = served[0].json()["choices"][0]["message"]["content"]
    assert len(completion) > 8
    text = json.dumps(rows)
    assert PROMPT[0]["content"] not in text and completion not in text
    assert _steps(rows[8]) == [("tried", limited.connections[0], "http_error", 429)]
    [skip] = rows[7]["trail"]
    assert (skip["kind"], skip["connection_id"]) == ("skipped", limited.connections[0])
    assert skip["outcome"] == "model_lockout" and "for 60s" in skip["detail"]
    for row, answer in zip(rows, answers, strict=True):
        assert row["key_prefix"] and row["key_prefix"] not in ("-", healthy.key)
        assert row["endpoint"] == "/v1/chat/completions"
        assert row["attempts"] == len([s for s in row["trail"] if s["kind"] == "tried"])
        assert answer.headers["x-omniroute-request-id"] == row["request_id"]


def _served_by(row: dict[str, Any], route: Route, connection: int) -> None:
    assert row["status"] == 200 and row["error_code"] == ""
    assert row["key_name"] == f"{route.provider}-client"
    assert row["model"] == route.model()
    assert (row["provider"], row["target_model"]) == (route.provider, "gpt-test")
    assert row["connection_id"] == route.connections[connection]
    assert row["connection_name"] == f"c{connection + 1}"


def test_an_operator_sees_a_failed_over_requests_trail_in_the_admin(
    logging_gateway: Gateway, fake: FakeUpstream, browser: webdriver.Chrome
) -> None:
    gateway = logging_gateway
    route = make_route(gateway, fake, {"reset": "before"}, {})
    moved = ask(gateway, route.key, route.model())
    [row] = logged(gateway, [moved])
    log_in(browser, gateway)

    browser.get(f"{gateway.url}/admin/requestlog/requestlogentry/?q={row['request_id']}")
    links = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody th a")
    assert len(links) == 1
    links[0].click()
    WebDriverWait(browser, WAIT_SECONDS).until(
        lambda c: c.find_elements(By.CSS_SELECTOR, "ol.request-trail li")
    )

    items = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ol.request-trail li")]
    assert len(items) == 2
    assert items[0].startswith("tried") and "network_error" in items[0]
    assert f"connection {route.connections[0]}" in items[0]
    assert items[1].startswith("tried") and "success" in items[1] and "HTTP 200" in items[1]
    assert f"connection {route.connections[1]}" in items[1]
