"""Token counts as usage blocks give them (routing/domain/client/usage.py): an upstream's
garbage is no count, and no count outgrows the request log's columns."""

from __future__ import annotations

from routing.domain.client.usage import MAX_TOKENS, added, count, usage_tokens


def test_a_count_past_what_the_request_log_holds_is_no_count() -> None:
    assert count(MAX_TOKENS) == MAX_TOKENS
    assert count(MAX_TOKENS + 1) is None
    assert count(2**64 - 1, before=7) == 7
    assert usage_tokens({"prompt_tokens": 2**64 - 1, "completion_tokens": 3}) == (None, 3)


def test_two_segments_added_stay_within_it() -> None:
    assert added((MAX_TOKENS, 1), (MAX_TOKENS, 2)) == (MAX_TOKENS, 3)
