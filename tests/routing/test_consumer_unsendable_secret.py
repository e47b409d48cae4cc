"""A connection whose stored secret cannot go in an HTTP header (saved before secrets were
checked when saved, docs/operating.md): its attempts end locally, the loop fails over, and the
client never gets a 500 nor a piece of the secret."""

from __future__ import annotations

import logging

import pytest

from routing.models import ProviderConnection
from routing.proxy.upstream.client import UNSENDABLE_SECRET
from tests.routing.harness import BACKUP, OK, Gateway

pytestmark = pytest.mark.django_db(transaction=True)

UNSENDABLE = "sk-acme-caf\u00e9-0001"


@pytest.fixture
def unsendable(primary: int) -> int:
    """``primary``, its secret replaced behind the service's back, as an older gateway stored
    it."""
    connection = ProviderConnection.objects.get(pk=primary)
    connection.set_secret(UNSENDABLE)
    connection.save()
    return primary


async def test_the_next_connection_answers_and_the_operator_is_told(
    gateway: Gateway, unsendable: int, backup: int, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.fake.behaviours[BACKUP] = OK

    with caplog.at_level(logging.WARNING, logger="routing.proxy.upstream.client"):
        reply = await gateway.call()

    assert reply.status == 200
    assert reply.connection == backup
    assert gateway.fake.calls == [BACKUP]  # the unsendable one was never sent
    assert "secret cannot be sent in a header" in caplog.text
    assert UNSENDABLE not in caplog.text


async def test_alone_it_is_a_503_naming_the_cause_not_the_secret(
    gateway: Gateway, unsendable: int
) -> None:
    reply = await gateway.call()

    assert reply.status == 503
    assert reply.json()["error"]["code"] == UNSENDABLE_SECRET
    assert b"caf" not in reply.body
    assert gateway.fake.calls == []
