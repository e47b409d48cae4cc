"""The management API never repeats what a client sent unbounded: a refused choice, an unknown
settings key, a long list of field errors come back clipped (docs/architecture.md, bounds)."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import ErrorDetail
from rest_framework.test import APIClient

from omniroute.core.bounds import MAX_ECHO_CHARS, MAX_ECHO_ITEMS, bounded

HUGE = "x" * 100_000
# The envelope around a clipped echo: the message, field names, JSON punctuation.
ENVELOPE = 2_000

pytestmark = pytest.mark.django_db


def test_a_refused_choice_is_not_repeated_whole(manage_client: APIClient) -> None:
    answer = manage_client.post(
        "/api/providers/",
        {"slug": "echo", "name": "echo", "category": HUGE, "base_url": "http://127.0.0.1:9/v1"},
        format="json",
    )
    assert answer.status_code == 400
    assert len(answer.content) < ENVELOPE, len(answer.content)
    assert "category" in answer.json()["error"]["fields"]


def test_an_unknown_settings_key_is_not_repeated_whole(manage_client: APIClient) -> None:
    answer = manage_client.patch(
        "/api/resilience", {"attempts": {HUGE: 1}, HUGE[:50_000]: {}}, format="json"
    )
    assert answer.status_code == 400
    assert len(answer.content) < ENVELOPE, len(answer.content)


def test_bounded_keeps_codes_and_cuts_strings_keys_and_lists() -> None:
    detail = {
        "k" * 1000: [ErrorDetail("m" * 1000, code="invalid")] * (MAX_ECHO_ITEMS * 2),
        "short": "fine",
    }
    out = bounded(detail)
    (long_key, errors), short = list(out.items())
    assert len(long_key) == MAX_ECHO_CHARS
    assert len(errors) == MAX_ECHO_ITEMS
    assert all(len(e) == MAX_ECHO_CHARS and e.code == "invalid" for e in errors)
    assert short == ("short", "fine")
    assert bounded({str(n): n for n in range(MAX_ECHO_ITEMS * 3)}).keys() == {
        str(n) for n in range(MAX_ECHO_ITEMS)
    }


@pytest.mark.parametrize("path", ["/api/connections/", "/api/feature-flags/"])
def test_a_list_of_messages_is_written_as_text(manage_client: APIClient, path: str) -> None:
    """A filter refuses with a list of messages: the answer says them, not a Python repr."""
    answer = manage_client.get(path, {"search": "a\x00"})

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "Null characters are not allowed."
