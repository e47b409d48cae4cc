"""Availability first, end to end through the chat consumer.

A failure is charged to the narrowest scope its evidence supports: 5xx and 429s without
account-wide evidence to the (connection, model) pair, client mistakes to the request alone.
A lone transient failure leaves no timer and is retried once when no other target is left;
three in a row lock the pair for 2 s, doubled by each failed probe up to 30 s and back to 2 s
after a success; when only self-set timers exclude every target, one panic
attempt is made. ``httpx.MockTransport`` plays the upstream and a ``MemoryStore`` on
a fake clock holds the state, so timers run out without sleeping.
"""

from __future__ import annotations

import httpx
import orjson
import pytest
from channels.db import database_sync_to_async

from resilience.services import resilience_settings_update
from resilience.services.breakers import breaker_get
from resilience.services.lockout_operations import lockout_list
from resilience.services.lockouts import lockout_record
from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.harness import (
    BACKUP,
    OK,
    PRIMARY,
    UNAVAILABLE,
    Behaviour,
    Gateway,
    error,
)

pytestmark = pytest.mark.django_db(transaction=True)

BASE_SECONDS = 2  # availability.transientCooldownBaseMs
CAP_SECONDS = 30  # availability.transientCooldownCapMs


def by_model(**behaviours: Behaviour) -> Behaviour:
    """Answer by the upstream model the request names."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        return await behaviours[orjson.loads(request.content)["model"]](request)

    return behaviour


def add_combo(name: str, provider: Provider, *models: str) -> None:
    targets = [{"provider": provider, "model": model} for model in models]
    combo_save(combo=Combo(), fields={"name": name}, targets=targets)


async def lock_remaining(gateway: Gateway, connection_id: int, model: str) -> float:
    record = await lockout_record(store=gateway.store, provider="acme", connection_id=connection_id)
    lock = record.lock_for(model, gateway.clock.now)
    return 0.0 if lock is None else lock.remaining(gateway.clock.now)


# --- a lone transient failure ----------------------------------------------------------------


async def test_a_lone_503_on_the_only_target_is_retried_once_and_leaves_no_timer(
    gateway: Gateway, primary: int
) -> None:
    answers = iter([UNAVAILABLE, OK])

    async def once_then_ok(request: httpx.Request) -> httpx.Response:
        return await next(answers)(request)

    gateway.fake.behaviours[PRIMARY] = once_then_ok

    reply = await gateway.call("acme/a")

    assert reply.status == 200
    assert gateway.fake.calls == [PRIMARY, PRIMARY]
    assert reply.decision()["attempts"] == "2"
    assert await gateway.cooling_for(primary) == 0
    assert await lockout_list(store=gateway.store) == []


async def test_a_503_and_its_retry_fail_over_and_the_connection_keeps_its_place(
    gateway: Gateway, primary: int, backup: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: OK})
    assert (await gateway.call("acme/a")).connection == backup

    gateway.fake.behaviours[PRIMARY] = OK
    assert (await gateway.call("acme/a")).connection == primary  # no timer was left
    assert gateway.fake.calls == [PRIMARY, PRIMARY, BACKUP, PRIMARY]


async def test_an_unbroken_failure_is_retried_once_then_answered(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE

    reply = await gateway.call("acme/a")

    assert reply.status == 503
    assert reply.json()["error"]["message"] == "service unavailable"
    assert gateway.fake.calls == [PRIMARY, PRIMARY]


# --- the pair, not the connection; bounded recovery ------------------------------------------


async def test_three_failures_of_one_model_lock_that_pair_and_its_other_models_keep_serving(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(a=UNAVAILABLE, b=OK)
    # given: model a fails three times in a row (a failure and its retry, then one more)
    await gateway.call("acme/a")
    await gateway.call("acme/a")
    # then: the pair is locked for the base; the connection is not cooled
    assert await lock_remaining(gateway, primary, "a") == BASE_SECONDS
    assert await gateway.cooling_for(primary) == 0
    (view,) = await lockout_list(store=gateway.store)
    assert (view.model, view.timer, view.reason) == ("a", "self_set", "server_error")
    # and: model b on the same connection is served throughout
    for _ in range(3):
        assert (await gateway.call("acme/b")).status == 200
    breaker = await breaker_get(store=gateway.store, name="acme")
    assert breaker.failure_count == 0  # one pair's failures never count for the provider


async def test_after_the_lock_one_probe_serves_and_a_success_clears_the_pair(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE
    await gateway.call("acme/a")
    await gateway.call("acme/a")
    gateway.clock.advance(BASE_SECONDS)
    gateway.fake.behaviours[PRIMARY] = OK
    calls = len(gateway.fake.calls)

    reply = await gateway.call("acme/a")

    assert reply.status == 200 and "panic" not in reply.decision()
    assert len(gateway.fake.calls) == calls + 1
    assert await lockout_list(store=gateway.store) == []
    record = await lockout_record(store=gateway.store, provider="acme", connection_id=primary)
    assert record.awaiting_probe("a", 3) is None  # the run is over


async def test_a_failed_probe_locks_the_pair_again_at_once_for_twice_as_long(
    gateway: Gateway, primary: int, backup: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: OK})
    for _ in range(3):
        await gateway.call("acme/a")  # primary fails, backup serves
    assert await lock_remaining(gateway, primary, "a") == BASE_SECONDS
    gateway.clock.advance(BASE_SECONDS)

    reply = await gateway.call("acme/a")  # the probe fails, the backup serves

    assert reply.connection == backup
    assert await lock_remaining(gateway, primary, "a") == 2 * BASE_SECONDS
    assert gateway.fake.calls[-2:] == [PRIMARY, BACKUP]


async def test_a_lower_cap_setting_shortens_the_lock(gateway: Gateway, primary: int) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"availability": {"transientCooldownCapMs": 2_000}}
    )
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE
    await gateway.call("acme/a")
    await gateway.call("acme/a")

    assert await lock_remaining(gateway, primary, "a") == 2


# --- panic instead of refusal ----------------------------------------------------------------


async def test_when_only_self_set_timers_exclude_every_target_one_panic_attempt_is_made(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE
    await gateway.call("acme/a")
    await gateway.call("acme/a")
    gateway.fake.behaviours[PRIMARY] = OK
    calls = len(gateway.fake.calls)

    reply = await gateway.call("acme/a")

    assert reply.status == 200
    assert reply.decision()["panic"] == "1"
    assert len(gateway.fake.calls) == calls + 1
    assert await lockout_list(store=gateway.store) == []  # the panic attempt was the probe


async def test_panic_can_be_switched_off(gateway: Gateway, primary: int) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"availability": {"panicEnabled": False}}
    )
    gateway.fake.behaviours[PRIMARY] = UNAVAILABLE
    await gateway.call("acme/a")
    await gateway.call("acme/a")
    calls = len(gateway.fake.calls)

    reply = await gateway.call("acme/a")

    assert (reply.status, reply.json()["error"]["code"]) == (503, "all_targets_cooling_down")
    assert len(gateway.fake.calls) == calls


async def test_an_upstream_hinted_lock_is_never_overridden_by_panic(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = error(429, "slow down", headers={"retry-after": "20"})
    assert (await gateway.call("acme/a")).status == 429
    calls = len(gateway.fake.calls)

    reply = await gateway.call("acme/a")

    assert (reply.status, reply.json()["error"]["code"]) == (503, "all_targets_cooling_down")
    assert reply.headers["retry-after"] == "20"
    assert len(gateway.fake.calls) == calls


# --- a hinted 429 is the pair's --------------------------------------------------------------


async def test_a_combo_on_one_connection_falls_back_to_the_other_model_on_a_hinted_429(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "a", "b")
    limited = error(429, "slow down", headers={"retry-after": "2"})
    gateway.fake.behaviours[PRIMARY] = by_model(a=limited, b=OK)

    replies = [await gateway.call("duo") for _ in range(5)]

    assert [reply.status for reply in replies] == [200] * 5
    # a's 2 s are waited out once (the attempt policy), then b answers
    assert gateway.fake.sent[:3] == [(PRIMARY, "a"), (PRIMARY, "a"), (PRIMARY, "b")]
    assert gateway.fake.sent[3:] == [(PRIMARY, "b")] * 4  # a is locked for exactly 2 s
    assert await lock_remaining(gateway, primary, "a") == 2
    assert await gateway.cooling_for(primary) == 0
    gateway.clock.advance(2)
    gateway.fake.behaviours[PRIMARY] = OK
    assert (await gateway.call("duo")).status == 200
    assert gateway.fake.sent[-1] == (PRIMARY, "a")


async def test_a_combo_on_one_connection_falls_back_on_every_503(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "a", "b")
    gateway.fake.behaviours[PRIMARY] = by_model(a=UNAVAILABLE, b=OK)

    replies = [await gateway.call("duo") for _ in range(6)]

    assert [reply.status for reply in replies] == [200] * 6
    assert await gateway.cooling_for(primary) == 0


# --- client mistakes stay with the client ---------------------------------------------------


NOT_FOUND = error(404, "The model `nope` does not exist", "model_not_found")


async def test_an_unknown_model_answers_404_and_changes_nothing(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, real=OK)

    for _ in range(5):
        reply = await gateway.call("acme/nope")
        assert (reply.status, reply.json()["error"]["code"]) == (404, "model_not_found")

    assert (await gateway.call("acme/real")).status == 200
    assert gateway.fake.calls == [PRIMARY] * 6  # no retry of a client mistake
    assert await gateway.cooling_for(primary) == 0
    assert await lockout_list(store=gateway.store) == []
    assert (await breaker_get(store=gateway.store, name="acme")).failure_count == 0


async def test_a_combo_tries_its_next_target_after_a_404(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "nope", "real")
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, real=OK)

    reply = await gateway.call("duo")

    assert reply.status == 200
    assert gateway.fake.sent == [(PRIMARY, "nope"), (PRIMARY, "real")]


async def test_a_combo_never_answers_a_404_while_a_self_set_timer_holds_a_server_back(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "nope", "a")
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, a=UNAVAILABLE)
    await gateway.call("acme/a")
    await gateway.call("acme/a")  # a failed twice in a row: its pair is locked (self-set)
    assert await lock_remaining(gateway, primary, "a") > 0
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, a=OK)
    calls = len(gateway.fake.calls)

    reply = await gateway.call("duo")

    # the 404 target cannot serve the request: the locked one gets the panic attempt
    assert reply.status == 200
    assert reply.decision()["panic"] == "1"
    assert gateway.fake.sent[calls:] == [(PRIMARY, "nope"), (PRIMARY, "a")]


async def test_a_combo_answers_the_timer_not_a_404_when_its_server_cannot_be_waited_for(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(resilience_settings_update)(
        patch={"comboCooldownWait": {"enabled": False}}
    )
    await database_sync_to_async(add_combo)("duo", acme, "nope", "a")
    limited = error(429, "slow down", headers={"retry-after": "20"})
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, a=limited)
    assert (await gateway.call("acme/a")).status == 429  # a 20 s hint: the pair is locked

    reply = await gateway.call("duo")

    assert (reply.status, reply.json()["error"]["code"]) == (503, "all_targets_cooling_down")
    assert reply.headers["retry-after"] == "20"
    assert "model_lockout" in reply.decision()["excluded"]


async def test_a_combo_waits_for_a_hinted_timer_instead_of_answering_a_404(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "nope", "a")
    limited = error(429, "slow down", headers={"retry-after": "20"})
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, a=limited)
    assert (await gateway.call("acme/a")).status == 429
    gateway.fake.behaviours[PRIMARY] = by_model(nope=NOT_FOUND, a=OK)
    started = gateway.clock.now

    reply = await gateway.call("duo")

    assert reply.status == 200
    assert gateway.fake.sent[-1] == (PRIMARY, "a")
    assert gateway.clock.now - started >= 20  # the lock was waited out (on the fake clock)


async def test_context_length_moves_to_the_next_target_without_a_retry(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "small", "large")
    too_long = error(
        400, "This model's maximum context length is 8192 tokens", "context_length_exceeded"
    )
    gateway.fake.behaviours[PRIMARY] = by_model(small=too_long, large=OK)

    assert (await gateway.call("duo")).status == 200
    assert gateway.fake.sent == [(PRIMARY, "small"), (PRIMARY, "large")]
    assert await lockout_list(store=gateway.store) == []


async def test_a_content_policy_refusal_is_returned_without_fail_over(
    gateway: Gateway, acme: Provider, primary: int
) -> None:
    await database_sync_to_async(add_combo)("duo", acme, "a", "b")
    refused = error(400, "Your request was rejected by our content policy", "content_policy")
    gateway.fake.behaviours[PRIMARY] = by_model(a=refused, b=OK)

    reply = await gateway.call("duo")

    assert reply.status == 400
    assert gateway.fake.sent == [(PRIMARY, "a")]
    assert await gateway.cooling_for(primary) == 0


async def test_invalid_parameters_are_returned_and_change_nothing(
    gateway: Gateway, primary: int
) -> None:
    gateway.fake.behaviours[PRIMARY] = error(422, "temperature must be at most 2", "invalid")

    reply = await gateway.call("acme/a")

    assert reply.status == 422
    assert gateway.fake.calls == [PRIMARY]
    assert await gateway.cooling_for(primary) == 0
    assert await lockout_list(store=gateway.store) == []
