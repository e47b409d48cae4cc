"""Cache-optimized routing, pure: the prompt-cache key of Chat
Completions, Messages and Responses payloads, and rendezvous hashing of the targets."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target
from routing.strategies.cache import (
    MAX_PROMPT_CACHE_KEY_CHARS,
    prompt_cache_key,
    rendezvous,
    target_identity,
)

PROVIDER = ProviderInfo("alpha", "Alpha", "api_key", "https://alpha.test/v1", WireFormat.OPENAI)


def target(connection_id: int, model: str = "m") -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider="alpha",
        name=f"alpha-{connection_id}",
        priority=connection_id,
        base_url="https://alpha.test/v1",
        auth_type="api_key",
    )
    return Target(PROVIDER, connection, model)


A, B, C, D = (target(i) for i in range(1, 5))


def by_connection(t: Target) -> str:
    return f"connection:{t.connection.id}"


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


SYSTEM = {"role": "system", "content": "You are a careful reviewer."}


# -- the key --------------------------------------------------------------------------------------


def test_an_explicit_key_beats_the_prefix_and_the_root_beats_metadata() -> None:
    conversation = {"messages": [SYSTEM, user("hi")]}
    assert prompt_cache_key({**conversation, "prompt_cache_key": "repo-42"}) == "repo-42"
    in_metadata = {**conversation, "metadata": {"prompt_cache_key": "meta"}}
    assert prompt_cache_key(in_metadata) == "meta"
    assert prompt_cache_key({**in_metadata, "prompt_cache_key": "root"}) == "root"


@pytest.mark.parametrize(
    "bad", ["", "   ", "x" * (MAX_PROMPT_CACHE_KEY_CHARS + 1), 42, None, ["k"]]
)
def test_an_unusable_explicit_key_is_ignored(bad: object) -> None:
    assert prompt_cache_key({"prompt_cache_key": bad, "metadata": {"prompt_cache_key": "m"}}) == "m"
    prefix = prompt_cache_key({"messages": [user("hi")]})
    assert prompt_cache_key({"prompt_cache_key": bad, "messages": [user("hi")]}) == prefix


def test_an_explicit_key_of_exactly_the_limit_is_kept() -> None:
    longest = "k" * MAX_PROMPT_CACHE_KEY_CHARS
    assert prompt_cache_key({"prompt_cache_key": longest}) == longest


@pytest.mark.parametrize(
    "payload",
    [
        {"messages": []},
        {"system": "", "messages": []},
        {"instructions": None, "input": []},
        {},
        {"metadata": "not an object", "messages": "not a list"},
    ],
)
def test_a_request_with_nothing_reusable_has_no_key(payload: dict[str, Any]) -> None:
    assert prompt_cache_key(payload) is None


@pytest.mark.parametrize(
    ("first", "later"),
    [
        # Chat Completions: the system message and the opening user turn.
        (
            {"messages": [SYSTEM, user("q1")]},
            {"messages": [SYSTEM, user("q1"), assistant("a1"), user("q2")]},
        ),
        ({"messages": [user("q1")]}, {"messages": [user("q1"), assistant("a1"), user("q2")]}),
        # Messages: ``system`` beside the messages (a string or content blocks).
        (
            {"system": "Be terse.", "messages": [user("q1")]},
            {"system": "Be terse.", "messages": [user("q1"), assistant("a1"), user("q2")]},
        ),
        (
            {"system": [{"type": "text", "text": "Be terse."}], "messages": [user("q1")]},
            {
                "system": [{"type": "text", "text": "Be terse."}],
                "messages": [user("q1"), assistant("a1"), user("q2")],
            },
        ),
        # Responses: ``instructions`` and the opening ``input`` (a string is that turn).
        (
            {"instructions": "Be terse.", "input": "q1"},
            {"instructions": "Be terse.", "input": [user("q1"), assistant("a1"), user("q2")]},
        ),
        ({"input": [user("q1")]}, {"input": [user("q1"), assistant("a1"), user("q2")]}),
    ],
    ids=["chat-system", "chat", "messages", "messages-blocks", "responses", "responses-items"],
)
def test_a_conversation_keeps_its_key_from_its_first_turn(
    first: dict[str, Any], later: dict[str, Any]
) -> None:
    key = prompt_cache_key(first)
    assert key is not None
    assert len(key) == 64 and int(key, 16) >= 0  # a SHA-256 hex digest
    assert prompt_cache_key(later) == key
    third = {**later}
    name = "messages" if "messages" in later else "input"
    third[name] = [*later[name], assistant("a2"), user("q3")]
    assert prompt_cache_key(third) == key


def test_the_prefix_key_changes_with_the_prefix_and_not_with_key_order() -> None:
    base = prompt_cache_key({"messages": [user("q1"), assistant("a1"), user("q2")]})
    edited = prompt_cache_key({"messages": [user("q1!"), assistant("a1"), user("q2")]})
    assert base is not None and edited is not None and base != edited
    reordered = [
        {"content": "q1", "role": "user"},
        {"content": "a1", "role": "assistant"},
        user("x"),
    ]
    assert prompt_cache_key({"messages": reordered}) == base
    other_system = prompt_cache_key({"system": "Be verbose.", "messages": [user("a")]})
    assert other_system != prompt_cache_key({"system": "Be terse.", "messages": [user("a")]})


def test_the_system_part_and_the_turns_both_count() -> None:
    turns = [user("q1"), assistant("a1"), user("q2")]
    assert prompt_cache_key({"system": "S", "messages": turns}) != prompt_cache_key(
        {"messages": turns}
    )


# -- rendezvous -----------------------------------------------------------------------------------


def test_rendezvous_follows_the_documented_score() -> None:
    def score(t: Target) -> int:
        digest = hashlib.sha256(b"conversation-7\x00" + by_connection(t).encode()).digest()
        return int.from_bytes(digest[:16], "big")

    expected = sorted((A, B, C, D), key=score, reverse=True)
    assert rendezvous((A, B, C, D), "conversation-7", by_connection) == tuple(expected)


def test_the_same_key_gives_the_same_order_whatever_the_declared_order() -> None:
    first = rendezvous((A, B, C), "k-1", by_connection)
    for _ in range(5):
        assert rendezvous((A, B, C), "k-1", by_connection) == first
    assert rendezvous((C, A, B), "k-1", by_connection) == first


def test_different_keys_spread_over_the_targets() -> None:
    firsts = Counter(rendezvous((A, B, C), f"key-{n}", by_connection)[0] for n in range(300))
    assert set(firsts) == {A, B, C}
    assert min(firsts.values()) >= 60


def test_removing_a_target_moves_only_the_keys_that_preferred_it() -> None:
    for n in range(200):
        key = f"key-{n}"
        first = rendezvous((A, B, C), key, by_connection)[0]
        if first is not C:
            assert rendezvous((A, B), key, by_connection)[0] is first


def test_rendezvous_ties_fall_back_to_declared_order() -> None:
    # One identity for all: equal scores and identities, so the declared order decides.
    assert rendezvous((C, A, B), "k", lambda t: "same") == (C, A, B)
    assert rendezvous((), "k", by_connection) == ()


def test_target_identity_is_the_connection_unless_it_serves_several_models() -> None:
    big, small = target(5, "big"), target(5, "small")
    plan: Sequence[Target] = (A, big, small)
    assert [target_identity(t, plan) for t in plan] == [
        "connection:1",
        "execution:5:big",
        "execution:5:small",
    ]
    ordered = rendezvous(plan, "k", lambda t: target_identity(t, plan))
    assert Counter(map(id, ordered)) == Counter(map(id, plan))
