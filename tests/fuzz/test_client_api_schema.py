"""The ``/v1`` client APIs fuzzed from the gateway's OpenAPI schema, against a running gateway.

The ``/v1`` routes are Channels consumers, not Django views, so the requests go over HTTP to a
real ``manage.py serve`` process (the end-to-end harness's, its own database in a temporary
directory) whose connections point at the fake upstream: a request the gateway accepts is
answered. The client key may use two providers, one speaking OpenAI's wire format (chat
completions, responses) and one Anthropic's (messages); a drawn body's ``model``, when it is a
string, is replaced by one the key may use, so the fuzzer reaches the upstream and not only
the gateway's 404. Checks: never a 5xx (but the 504 a tiny ``X-OmniRoute-Deadline-Ms`` asks
for), and the answers conform to the schema (status codes, content types, headers, bodies).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.test import Client, override_settings
from hypothesis import settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import negative_data_rejection

from omniroute.tools.fakeupstream import FakeUpstream
from routing.domain.client.endpoints import CLIENT_APIS, Endpoint
from tests.e2e.conftest import Gateway, make_route, prepare_gateway, serving
from tests.fuzz.conftest import API_EXAMPLES, CASES, PROFILE

pytestmark = [pytest.mark.fuzz, pytest.mark.e2e]

MESSAGES = "/v1/messages"
DEADLINE = "X-OmniRoute-Deadline-Ms"
# Under this many milliseconds a client's deadline may run out before the fake answers.
TINY_DEADLINE_MS = 1_000


@dataclass
class LiveGateway:
    """The running gateway, its client key and the model each wire format is served under."""

    gateway: Gateway
    fake: FakeUpstream
    key: str
    openai_model: str
    anthropic_model: str


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    data_dir: Path = tmp_path_factory.mktemp("client-fuzz")
    env, manage_key = prepare_gateway(data_dir)
    with FakeUpstream().start() as fake, serving(env, manage_key) as gateway:
        openai = make_route(gateway, fake, served_models=["gpt-test"])
        anthropic = make_route(gateway, fake, wire_format="anthropic", served_models=["claude"])
        key = gateway.post(
            "/api/keys/",
            {
                "name": f"fuzz-client-{secrets.token_hex(4)}",
                "allowed_models": [f"{openai.provider}/*", f"{anthropic.provider}/*"],
            },
        )
        yield LiveGateway(gateway, fake, key["key"], openai.model(), anthropic.model("claude"))
        gateway.api.close()


def _load() -> schemathesis.schemas.BaseSchema:
    # The schema is private with debug off; the fuzzer reads it as an opted-out deployment would.
    with override_settings(PUBLIC_API_DOCS=True):
        raw = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    config = SchemathesisConfig.from_dict(
        {
            "phases": {"coverage": {"enabled": PROFILE == "long"}},
            "generation": {"deterministic": PROFILE != "long"},
        }
    )
    return schemathesis.openapi.from_dict(raw, config=config).include(path_regex="^/v1/")


schema = _load()

# Left out: negative_data_rejection. The gateway reads only the fields the schema describes and
# passes the rest through, and it parses ``stream: null`` or a header's spaces leniently, so
# some requests the schema calls invalid are rightly answered.
EXCLUDED = [negative_data_rejection]


def _tiny_deadline(case: Any) -> bool:
    value = str((case.headers or {}).get(DEADLINE, "")).strip()
    return value.isdigit() and int(value) < TINY_DEADLINE_MS


@schema.parametrize()
@settings(max_examples=API_EXAMPLES[PROFILE], deadline=None)
def test_client_api(case: Any, live: LiveGateway) -> None:
    CASES[f"v1 {case.operation.label}"] += 1
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        path = case.operation.path
        body["model"] = live.anthropic_model if path == MESSAGES else live.openai_model
    excluded = EXCLUDED
    if _tiny_deadline(case):  # the client asked for it: a 504 is the right answer
        excluded = [*EXCLUDED, not_a_server_error]
    response = case.call_and_validate(
        base_url=live.gateway.url,
        headers={"Authorization": f"Bearer {live.key}"},
        excluded_checks=excluded,
    )
    if response.status_code >= 500:
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "request_deadline_exceeded"


# Runs after the fuzzed operations (pytest keeps a module's order): their requests were not all
# refused by the gateway, each client API's reached the fake upstream.
@pytest.mark.parametrize("api", [api for api in CLIENT_APIS if api.described is not None])
def test_the_fuzzed_requests_reached_the_upstream(api: Endpoint, live: LiveGateway) -> None:
    paths = [record.path for record in live.fake.requests]
    assert any(path.endswith(api.upstream_path) for path in paths), api.route
