"""A corpus of bad input, over real HTTP against one running gateway: the three /v1 wire
formats, the management API, the lease API and the WebSocket.

The cases live in ``tests/e2e/bad_input/``, one module per surface. Each says what it sends
and the exact status it must get; every answer must be in its surface's error shape (OpenAI's,
Anthropic's on ``/v1/messages``, the lease API's codes), never a 5xx, within
:data:`ANSWER_SECONDS`, and the fake upstream must see a request only when the case is one the
gateway should serve (extra fields, a duplicate key whose last value is good).
``test_the_corpus_covers_every_surface`` prints the count per surface (``pytest -s``).
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from websockets.exceptions import InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.bad_input.case import LEASE, MANAGEMENT, MODEL, PROVIDER, SOCKET, Case
from tests.e2e.bad_input.lease import lease_cases
from tests.e2e.bad_input.management import management_cases
from tests.e2e.bad_input.socket_cases import SOCKET_CASES, SocketCase
from tests.e2e.bad_input.v1 import v1_cases, v1_specific_cases
from tests.e2e.conftest import Gateway, Route, make_route, records
from tests.e2e.hostile_support import (
    ANSWER_SECONDS,
    ANTHROPIC,
    MESSAGES_API,
    OPENAI,
    SURFACES,
    assert_wire_error,
    timed,
)

pytestmark = pytest.mark.e2e

# --- the cases, run ---------------------------------------------------------------------------

HTTP_CASES = [
    *(case for surface in SURFACES for case in v1_cases(surface)),
    *v1_specific_cases(),
    *management_cases(),
    *lease_cases(),
]
SURFACE_OF = {surface.name: surface for surface in SURFACES}


@dataclass
class Routes:
    """The module's routes: one per wire format, a manage-less client key, a lease key."""

    openai: Route
    anthropic: Route
    leased: Route
    client_key: str
    lease_key: str

    def for_surface(self, name: str) -> Route:
        if name == LEASE:
            return self.leased
        return self.anthropic if name == MESSAGES_API.name else self.openai


@pytest.fixture(scope="module")
def routes(gateway: Gateway, fake: FakeUpstream) -> Routes:
    openai = make_route(gateway, fake)
    anthropic = make_route(gateway, fake, wire_format=ANTHROPIC)
    leased = make_route(gateway, fake)  # a lease key's connections serve only managed requests
    client = gateway.post("/api/keys/", {"name": f"corpus-{secrets.token_hex(3)}"})["key"]
    lease = gateway.post(
        "/api/keys/",
        {
            "name": f"corpus-lease-{secrets.token_hex(3)}",
            "scopes": ["lease:exclusive"],
            "allowed_connections": leased.connections,
            "allowed_models": [f"{leased.provider}/*"],
        },
    )["key"]
    return Routes(openai, anthropic, leased, client, lease)


def _authorization(case: Case, gateway: Gateway, routes: Routes, route: Route) -> dict[str, str]:
    keys: dict[str, Callable[[], str | None]] = {
        "key": lambda: f"Bearer {_key_for(case, gateway, routes, route)}",
        "none": lambda: None,
        "wrong": lambda: "Bearer sk-omr-" + "0" * 40,
        "client": lambda: f"Bearer {routes.client_key}",
    }
    value = keys[case.auth]() if case.auth in keys else case.auth
    return {} if value is None else {"authorization": value}


def _key_for(case: Case, gateway: Gateway, routes: Routes, route: Route) -> str:
    if case.surface == MANAGEMENT:
        return gateway.manage_key
    if case.surface == LEASE:
        return routes.lease_key
    return route.key


def _wire_format(case: Case) -> str:
    return ANTHROPIC if case.surface == MESSAGES_API.name else OPENAI


def _upstream_calls(fake: FakeUpstream, route: Route) -> int:
    return len([r for r in records(fake, route, path="") if r.method == "POST"])


@pytest.mark.parametrize("case", HTTP_CASES, ids=[case.id for case in HTTP_CASES])
def test_bad_http_input_gets_a_clean_answer(
    gateway: Gateway, fake: FakeUpstream, routes: Routes, case: Case
) -> None:
    route = routes.for_surface(case.surface)
    surface = SURFACE_OF.get(case.surface)
    path = case.path or (surface.path if surface else "")
    content = case.content.replace(MODEL, route.model().encode()).replace(
        PROVIDER, route.provider.encode()
    )
    headers = {**case.headers, **_authorization(case, gateway, routes, route)}
    if "content-type" not in headers and content:
        headers["content-type"] = "application/json"
    headers = {k: v for k, v in headers.items() if v != ""}
    before = _upstream_calls(fake, route)

    response, seconds = timed(
        httpx.request,
        case.method,
        f"{gateway.url}{path}",
        content=content,
        headers=headers,
        timeout=10,
    )

    if case.status < 300:
        assert response.status_code == case.status, response.text[:300]
    else:
        error = assert_wire_error(response, case.status, _wire_format(case))
        if case.surface == LEASE and case.status in (400, 401, 415):
            assert str(error["code"]).startswith("LEASE_"), error
    assert _upstream_calls(fake, route) - before == (1 if case.upstream_due else 0)
    assert seconds < ANSWER_SECONDS, f"answered in {seconds:.2f} s"


@pytest.mark.parametrize("case", SOCKET_CASES, ids=[f"{SOCKET}: {c.name}" for c in SOCKET_CASES])
def test_bad_socket_handshakes_are_refused(gateway: Gateway, case: SocketCase) -> None:
    headers = dict(case.headers)
    if case.origin is not None:
        headers["Origin"] = case.origin.replace("@OWN@", gateway.url)
    url = gateway.url.replace("http://", "ws://") + case.path

    def handshake() -> None:
        with pytest.raises(InvalidHandshake) as refused:
            connect(url, additional_headers=headers, open_timeout=5)
        assert isinstance(refused.value, InvalidStatus), refused.value
        assert refused.value.response.status_code == case.status

    _, seconds = timed(handshake)
    assert seconds < ANSWER_SECONDS, f"answered in {seconds:.2f} s"


def test_the_corpus_covers_every_surface() -> None:
    counts = Counter(case.surface for case in HTTP_CASES)
    counts[SOCKET] = len(SOCKET_CASES)
    print("\nbad-input corpus, cases per surface:", dict(counts), "total", sum(counts.values()))
    assert sum(counts.values()) >= 200
    for surface in (*SURFACE_OF, MANAGEMENT, LEASE, SOCKET):
        assert counts[surface] >= 15, surface
