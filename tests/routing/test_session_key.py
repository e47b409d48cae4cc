"""A request's session key."""

from __future__ import annotations

import hashlib

import pytest

from routing.domain.affinity.session_key import first_input_text, normalised, session_key, text_of


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_headers_come_first_in_their_order():
    headers = [(b"x-omniroute-session", b"c"), (b"x-session-id", b"b")]
    assert session_key({"session_id": "body"}, headers) == "header:b"
    headers.append((b"x-codex-session-id", b"a"))
    assert session_key({}, headers) == "header:a"


def test_an_empty_header_falls_through_to_the_next_source():
    assert session_key({"session_id": "s1"}, [(b"x-session-id", b"   ")]) == "session:s1"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"metadata": {"session_id": "m1", "sessionId": "m2"}}, "metadata:m1"),
        ({"metadata": {"sessionId": "m2"}, "conversation_id": "c"}, "metadata:m2"),
        ({"conversation_id": "c", "session_id": "s"}, "conversation:c"),
        ({"session_id": "s", "prompt_cache_key": "p"}, "session:s"),
        ({"prompt_cache_key": "p"}, "prompt-cache:p"),
    ],
)
def test_body_fields_in_their_order(payload, expected):
    assert session_key(payload, []) == expected


def test_values_that_are_not_plain_are_hashed():
    assert normalised("session", " a b ") == f"session:sha256:{sha('a b')}"
    long = "x" * 181
    assert normalised("session", long) == f"session:sha256:{sha(long)}"
    assert normalised("session", "x" * 180) == "session:" + "x" * 180


def test_unusable_values_are_ignored():
    assert normalised("session", 12) is None
    assert normalised("session", "") is None
    assert normalised("session", "y" * 4097) is None


def test_the_first_user_text_is_the_fallback():
    payload = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ]
    }
    assert session_key(payload, []) == f"input:sha256:{sha('hello')}"


def test_no_recognisable_text_is_no_key():
    assert session_key({"messages": [{"role": "user", "content": "   "}]}, []) is None
    assert session_key({"model": "m", "tools": [{"x": 1}]}, []) is None


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"input": "plain"}, "plain"),
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}, "hi"),
        ({"messages": [{"role": "assistant", "content": "a"}]}, "a"),
        ({"contents": [{"role": "user", "parts": [{"text": "g1"}, {"text": "g2"}]}]}, "g1\ng2"),
        ({"prompt": "p", "query": "q"}, "p"),
        ({"query": "q"}, "q"),
        ({"instruction": "i"}, "i"),
    ],
)
def test_first_input_text_sources(payload, expected):
    assert first_input_text(payload) == expected


def test_text_of_never_dumps_an_object():
    assert text_of({"unrelated": {"text": "deep"}}) is None
    assert text_of([{"type": "image"}, "a", {"content": "b"}]) == "a\nb"
    assert text_of({"parts": [{"text": "x"}]}) == "x"


def test_text_is_bounded():
    assert len(text_of(["z" * 3000, "z" * 3000]) or "") == 4096
