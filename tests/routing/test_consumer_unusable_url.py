"""A connection whose stored base URL or outbound proxy the gateway's HTTP client cannot use
(saved before URLs were checked when saved, docs/operating.md): its attempts end locally
(never charged to the provider), the loop fails over, and the client never gets a 500. The
snapshot tells the operator, once per load rather than once per request."""

from __future__ import annotations

import logging

import pytest

from routing.models import ProviderConnection
from routing.proxy.upstream.client import UNUSABLE_URL
from tests.routing.harness import BACKUP, OK, Gateway

pytestmark = pytest.mark.django_db(transaction=True)

UNUSABLE = {  # each refused by the field now, stored by an older gateway
    "base URL, host no valid name": ("base_url", "http://\u00e9\u00e9.-com/v1"),
    "base URL, control character": ("base_url", "http://a\x01b.example/v1"),
    "base URL, another scheme": ("base_url", "ftp://upstream.example/v1"),
    "base URL, port out of range": ("base_url", "http://upstream.example:99999/v1"),
    "proxy, host no valid name": ("proxy_url", "http://\u00e9\u00e9.-com:3128"),
    "proxy, another scheme": ("proxy_url", "ftp://proxy.example:3128"),
}


@pytest.fixture(params=list(UNUSABLE.values()), ids=list(UNUSABLE))
def stored(request: pytest.FixtureRequest) -> tuple[str, str]:
    field, value = request.param
    return str(field), str(value)


@pytest.fixture
def unusable(primary: int, stored: tuple[str, str]) -> int:
    """``primary``, one of its URLs replaced behind the service's back."""
    field, value = stored
    ProviderConnection.objects.filter(pk=primary).update(**{field: value})
    return primary


async def test_the_next_connection_answers_and_the_operator_is_told_once(
    gateway: Gateway,
    unusable: int,
    backup: int,
    stored: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway.fake.behaviours[BACKUP] = OK

    with caplog.at_level(logging.WARNING):
        replies = [await gateway.call() for _ in range(3)]

    assert [(r.status, r.connection) for r in replies] == [(200, backup)] * 3
    assert gateway.fake.calls == [BACKUP] * 3
    told = [r for r in caplog.records if "cannot be used by the gateway" in r.getMessage()]
    assert len(told) == 1  # when the configuration was loaded, not per request
    message = told[0].getMessage()
    assert f"connection {unusable} " in message
    assert ("proxy" in message) == (stored[0] == "proxy_url")


async def test_alone_it_is_a_503_naming_the_cause(gateway: Gateway, unusable: int) -> None:
    reply = await gateway.call()

    assert reply.status == 503
    assert reply.json()["error"]["code"] == UNUSABLE_URL
    assert gateway.fake.calls == []


async def test_it_is_never_charged_to_the_provider(
    gateway: Gateway, unusable: int, backup: int
) -> None:
    gateway.fake.behaviours[BACKUP] = OK
    for _ in range(20):  # far past the breaker's minimum calls and failure rate
        assert (await gateway.call()).status == 200

    breaker = await gateway.breaker("acme")
    assert (breaker.failure_count, breaker.last_failure_kind) == (0, None)
    assert (await gateway.state(unusable)).is_clean  # no cooldown, no error recorded
