"""A connection whose stored secret cannot go in an HTTP header (saved before secrets were
checked when saved, docs/operating.md): it is never sent, its attempts end locally (never
charged to the provider), the loop fails over, and the client never gets a 500 nor a piece of
the secret. The snapshot tells the operator, once per load rather than once per request."""

from __future__ import annotations

import logging

import pytest

from routing.models import ProviderConnection
from routing.proxy.upstream.client import UNSENDABLE_SECRET
from tests.routing.harness import BACKUP, OK, Gateway

pytestmark = pytest.mark.django_db(transaction=True)

UNSENDABLE = "sk-acme-caf\u00e9-0001"
UNSENDABLE_SECRETS = {
    "not ASCII": UNSENDABLE,
    "a line break": "sk-acme-0001\r\nX-Injected: 1",
    "a space at an end": " sk-acme-0001",
}


@pytest.fixture(params=list(UNSENDABLE_SECRETS.values()), ids=list(UNSENDABLE_SECRETS))
def secret(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def unsendable(primary: int, secret: str) -> int:
    """``primary``, its secret replaced behind the service's back, as an older gateway stored
    it."""
    connection = ProviderConnection.objects.get(pk=primary)
    connection.set_secret(secret)
    connection.save()
    return primary


async def test_the_next_connection_answers_and_the_operator_is_told_once(
    gateway: Gateway,
    unsendable: int,
    backup: int,
    secret: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway.fake.behaviours[BACKUP] = OK

    with caplog.at_level(logging.WARNING):
        replies = [await gateway.call() for _ in range(3)]

    assert [(r.status, r.connection) for r in replies] == [(200, backup)] * 3
    assert gateway.fake.calls == [BACKUP] * 3  # the unsendable one was never sent
    told = [r for r in caplog.records if "secret cannot be sent in a header" in r.getMessage()]
    assert len(told) == 1  # when the configuration was loaded, not per request
    assert f"connection {unsendable} " in told[0].getMessage()
    assert secret.strip() not in caplog.text


async def test_alone_it_is_a_503_naming_the_cause_not_the_secret(
    gateway: Gateway, unsendable: int, secret: str
) -> None:
    reply = await gateway.call()

    assert reply.status == 503
    assert reply.json()["error"]["code"] == UNSENDABLE_SECRET
    assert secret.strip().encode("utf-8") not in reply.body
    assert gateway.fake.calls == []


async def test_it_is_never_charged_to_the_provider(
    gateway: Gateway, unsendable: int, backup: int
) -> None:
    gateway.fake.behaviours[BACKUP] = OK
    for _ in range(20):  # far past the breaker's minimum calls and failure rate
        assert (await gateway.call()).status == 200

    breaker = await gateway.breaker("acme")
    assert (breaker.failure_count, breaker.last_failure_kind) == (0, None)
    assert (await gateway.state(unsendable)).is_clean  # no cooldown, no error recorded
