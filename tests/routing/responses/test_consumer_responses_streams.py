"""``POST /v1/responses`` streams, ``background`` and ``previous_response_id`` through the relay
consumer: streams fail over unseen before the first token and end with an in-band ``error``
event after it; background requests are served synchronously with a warning; a continued
response goes to the connection that produced it."""

from __future__ import annotations

import orjson
import pytest
from channels.db import database_sync_to_async

from omniroute.core import stopping
from resilience.domain.lockout import LockScope, model_slot
from resilience.services.lockouts import lockout_record
from routing.domain.client.requests import BACKGROUND_WARNING
from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.format_support import (
    RESPONSES_FIRST_TOKEN,
    TEXT,
    Relay,
    json_answer,
    named,
    response_object,
    responses_events,
    responses_request,
    responses_text,
    sse,
)
from tests.routing.harness import (
    BACKUP,
    PRIMARY,
    UNAVAILABLE,
    Behaviour,
    answer,
)
from tests.routing.stream_support import CUT, stopping_after, streaming

pytestmark = pytest.mark.django_db(transaction=True)

WARNING = "x-omniroute-warning"
# An answer as a provider may format it (indented, keys in its own order): relayed as is.
RAW_ANSWER = orjson.dumps(response_object(), option=orjson.OPT_INDENT_2)


def answered(ident: str) -> Behaviour:
    """A non-stream answer with ``ident`` as its id."""
    return json_answer(response_object(ident))


# --- 5. streams -------------------------------------------------------------------------------


async def test_a_stream_cut_after_its_first_token_ends_with_an_error_event_and_a_failure(
    relay: Relay, both: tuple[int, int]
) -> None:
    sent = responses_events()[: RESPONSES_FIRST_TOKEN + 2]  # two deltas
    relay.fake.behaviours.update(
        {PRIMARY: streaming(sent, then=CUT), BACKUP: streaming(responses_events(ident="r2"))}
    )

    reply = await relay.post(responses_request(stream=True))

    assert reply.status == 200
    assert reply.body.startswith(b"".join(sent))
    *relayed, (name, last) = sse(reply)
    assert len(relayed) == len(sent)
    assert name == "error"
    assert last["type"] == "error" and last["code"] == "upstream_stream_interrupted"
    assert last["sequence_number"] == len(sent)  # after the last one the client has
    assert "message" in last and "error" not in last
    assert responses_text(reply) == "".join(TEXT[:2])
    assert relay.fake.calls == [PRIMARY]  # a Responses stream is not continued elsewhere
    broke = await lockout_record(store=relay.store, provider="acme", connection_id=both[0])
    assert broke.failures[model_slot("m1", LockScope.EXACT)].consecutive == 1


async def test_a_stream_ending_before_response_completed_ends_with_an_error_event(
    relay: Relay, primary: int
) -> None:
    sent = responses_events(completed=False)
    relay.fake.behaviours[PRIMARY] = streaming(sent)

    reply = await relay.post(responses_request(stream=True))

    assert reply.body.startswith(b"".join(sent))
    name, last = sse(reply)[-1]
    assert (name, last["code"], last["sequence_number"]) == (
        "error",
        "upstream_stream_interrupted",
        len(sent),
    )


IN_BAND_FAILURE = named(
    "response.failed",
    {
        "type": "response.failed",
        "sequence_number": 1,
        "response": {
            "id": "resp_1",
            "status": "failed",
            "error": {"code": "server_error", "message": "overloaded"},
        },
    },
)

BEFORE_FIRST_TOKEN = {
    "cut": streaming(responses_events()[:RESPONSES_FIRST_TOKEN], then=CUT),
    "ended": streaming(responses_events()[:RESPONSES_FIRST_TOKEN]),
    "in-band-error": streaming([responses_events()[0], IN_BAND_FAILURE]),
}


@pytest.mark.parametrize("failure", BEFORE_FIRST_TOKEN.values(), ids=BEFORE_FIRST_TOKEN.keys())
async def test_a_stream_failing_before_its_first_token_fails_over_unseen(
    relay: Relay, both: tuple[int, int], failure: Behaviour
) -> None:
    second = responses_events(ident="resp_2")
    relay.fake.behaviours.update({PRIMARY: failure, BACKUP: streaming(second)})

    reply = await relay.post(responses_request(stream=True))

    assert (reply.status, reply.connection) == (200, both[1])
    assert reply.body == b"".join(second)  # nothing of the first stream, nothing twice
    assert relay.fake.calls[0] == PRIMARY and relay.fake.calls[-1] == BACKUP


# --- 6. background and previous_response_id ---------------------------------------------------


async def test_background_is_served_synchronously_with_a_warning(
    relay: Relay, primary: int
) -> None:
    relay.fake.behaviours[PRIMARY] = answer(200, RAW_ANSWER)

    reply = await relay.post(responses_request(background=True, store=True))

    (sent,) = relay.fake.bodies()
    assert "background" not in sent and sent["store"] is True
    assert reply.status == 200
    assert reply.headers[WARNING] == BACKGROUND_WARNING
    body = reply.json()
    assert body.pop("warnings") == [BACKGROUND_WARNING]
    assert body == orjson.loads(RAW_ANSWER)
    assert reply.headers["content-length"] == str(len(reply.body))


async def test_background_adds_to_the_warnings_the_upstream_sent(
    relay: Relay, primary: int
) -> None:
    relay.fake.behaviours[PRIMARY] = json_answer({**response_object(), "warnings": ["theirs"]})

    reply = await relay.post(responses_request(background=True))

    assert reply.json()["warnings"] == ["theirs", BACKGROUND_WARNING]


async def test_background_false_is_passed_on_without_a_warning(relay: Relay, primary: int) -> None:
    relay.fake.behaviours[PRIMARY] = answer(200, RAW_ANSWER)

    reply = await relay.post(responses_request(background=False))

    assert reply.body == RAW_ANSWER and WARNING not in reply.headers
    assert relay.fake.bodies()[0]["background"] is False


async def test_a_background_stream_has_the_warning_header_and_its_events_untouched(
    relay: Relay, primary: int
) -> None:
    events = responses_events()
    relay.fake.behaviours[PRIMARY] = streaming(events)

    reply = await relay.post(responses_request(stream=True, background=True))

    assert reply.headers[WARNING] == BACKGROUND_WARNING
    assert reply.body == b"".join(events)
    assert "background" not in relay.fake.bodies()[0]


async def test_previous_response_id_goes_to_the_connection_that_answered_it(
    relay: Relay, both: tuple[int, int]
) -> None:
    primary, backup = both
    # given: the primary was down, so resp_b came from the backup
    relay.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: answered("resp_b")})
    assert (await relay.post(responses_request())).connection == backup
    relay.fake.behaviours.update({PRIMARY: answered("resp_a"), BACKUP: answered("resp_b2")})
    calls = len(relay.fake.calls)

    # when: the primary is back, a continuation of resp_b goes to the backup
    pinned = await relay.post(responses_request(previous_response_id="resp_b"))
    # and: without one, or with an id the gateway never saw, the primary comes first
    fresh = await relay.post(responses_request())
    unknown = await relay.post(responses_request(previous_response_id="resp_elsewhere"))

    assert [pinned.connection, fresh.connection, unknown.connection] == [backup, primary, primary]
    assert relay.fake.calls[calls:] == [BACKUP, PRIMARY, PRIMARY]
    assert relay.fake.bodies()[calls]["previous_response_id"] == "resp_b"


async def test_a_streamed_answer_is_pinned_by_the_id_of_its_response_created(
    relay: Relay, both: tuple[int, int]
) -> None:
    backup = both[1]
    relay.fake.behaviours.update(
        {PRIMARY: UNAVAILABLE, BACKUP: streaming(responses_events(ident="resp_s"))}
    )
    assert (await relay.post(responses_request(stream=True))).connection == backup
    relay.fake.behaviours.update({PRIMARY: answered("resp_a"), BACKUP: answered("resp_b")})

    reply = await relay.post(responses_request(previous_response_id="resp_s"))

    assert reply.connection == backup


async def test_a_pinned_connection_failing_is_not_replaced_by_another(
    relay: Relay, both: tuple[int, int]
) -> None:
    backup = both[1]
    relay.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: answered("resp_b")})
    assert (await relay.post(responses_request())).connection == backup
    relay.fake.behaviours.update({PRIMARY: answered("resp_a"), BACKUP: UNAVAILABLE})
    calls = len(relay.fake.calls)

    reply = await relay.post(responses_request(previous_response_id="resp_b"))

    assert reply.status == 503  # the primary cannot see resp_b: it is never asked
    assert set(relay.fake.calls[calls:]) == {BACKUP}


async def test_previous_response_id_follows_a_combo_step_pinned_to_its_connection(
    relay: Relay, acme: Provider, both: tuple[int, int]
) -> None:
    backup = both[1]

    def add_combo() -> None:
        combo_save(
            combo=Combo(),
            fields={"name": "duo"},
            targets=[{"provider": acme, "model": "m1"}, {"provider": acme, "model": "m2"}],
        )

    await database_sync_to_async(add_combo)()
    relay.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: answered("resp_b")})
    assert (await relay.post(responses_request("duo"))).connection == backup
    relay.fake.behaviours.update({PRIMARY: answered("resp_a"), BACKUP: answered("resp_b2")})
    calls = len(relay.fake.calls)

    reply = await relay.post(responses_request("duo", previous_response_id="resp_b"))

    assert reply.connection == backup
    assert relay.fake.sent[calls:] == [(BACKUP, "m1")]


async def test_an_open_stream_ends_with_an_error_event_when_the_process_stops(
    relay: Relay, primary: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal = stopping.ShuttingDown()
    monkeypatch.setattr(stopping, "shutting_down", signal)
    sent = responses_events()[: RESPONSES_FIRST_TOKEN + 2]  # two text deltas, then nothing
    relay.fake.behaviours[PRIMARY] = stopping_after(sent, signal.set)

    reply = await relay.post(responses_request(stream=True))

    name, error = sse(reply)[-1]
    assert name == "error" and error["code"] == "server_shutting_down"
    assert error["sequence_number"] == len(sent)  # numbered after the last event relayed
    assert responses_text(reply) == "".join(TEXT[:2])
