"""The resilience events a request causes name it: the dashboard links such an event to the
request's entry in the request log by the ``X-OmniRoute-Request-Id`` its client got. A
background chore a request happened to start (``resilience.services.housekeeping``) is not
that request's doing, and names none."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from omniroute.core.events import ResilienceEvent, during_request, emit, listen, unlisten
from resilience.services import housekeeping
from tests.routing.harness import PRIMARY, Gateway, error

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def events() -> Iterator[list[ResilienceEvent]]:
    heard: list[ResilienceEvent] = []
    listen(heard.append)
    yield heard
    unlisten(heard.append)


@pytest.mark.usefixtures("primary")
async def test_an_event_a_request_caused_names_the_request(
    gateway: Gateway, events: list[ResilienceEvent]
) -> None:
    # given: the upstream refuses the connection's key (the connection becomes terminal)
    gateway.fake.behaviours[PRIMARY] = error(401, "bad key", "invalid_api_key")

    reply = await gateway.call()

    assert reply.status >= 400 and events
    assert {event.request_id for event in events} == {reply.headers["x-omniroute-request-id"]}


def test_an_event_outside_any_request_names_none(events: list[ResilienceEvent]) -> None:
    emit(ResilienceEvent("breaker", "acme", "open -> closed"))  # an operator's reset, say
    assert [event.request_id for event in events] == [""]


async def test_a_chore_a_request_started_names_no_request(events: list[ResilienceEvent]) -> None:
    async def chore() -> None:
        emit(ResilienceEvent("terminal", "connection 3", "expired"))  # a re-check, say

    async def request() -> None:
        during_request("abc")
        emit(ResilienceEvent("cooldown", "connection 3", "2000 ms"))
        await housekeeping._in_background(chore())

    await asyncio.get_running_loop().create_task(request())
    await housekeeping.housekeeping_settle()

    assert [(event.kind, event.request_id) for event in events] == [
        ("cooldown", "abc"),
        ("terminal", ""),
    ]
