"""The tokens an answer's usage block reports, whole or streamed (pure)."""

from __future__ import annotations

import pytest

from routing.domain.client.usage import NO_TOKENS, added, answer_tokens


@pytest.mark.parametrize(
    ("answer", "tokens"),
    [
        ({"usage": {"prompt_tokens": 12, "completion_tokens": 5}}, (12, 5)),  # Chat Completions
        ({"usage": {"input_tokens": 7, "output_tokens": 3}}, (7, 3)),  # Messages, Responses
        ({"usage": {"prompt_tokens": 4}}, (4, None)),
        ({"usage": {"prompt_tokens": True, "completion_tokens": -1}}, NO_TOKENS),
        ({"usage": "lots"}, NO_TOKENS),
        ({"usage": None}, NO_TOKENS),
        ({"choices": []}, NO_TOKENS),
        (None, NO_TOKENS),  # no parsed answer: a stream's reply
    ],
)
def test_a_whole_answer_s_tokens_come_from_its_usage_block(answer: object, tokens: object) -> None:
    assert answer_tokens(answer) == tokens


@pytest.mark.parametrize(
    ("first", "second", "together"),
    [
        (NO_TOKENS, NO_TOKENS, NO_TOKENS),
        ((None, None), (9, 4), (9, 4)),  # a cut stream without usage, then its continuation
        ((9, 4), (None, None), (9, 4)),
        ((9, 4), (11, 2), (20, 6)),
        ((9, None), (None, 2), (9, 2)),
    ],
)
def test_the_tokens_of_a_stream_s_segments_add_up(
    first: tuple[int | None, int | None],
    second: tuple[int | None, int | None],
    together: tuple[int | None, int | None],
) -> None:
    assert added(first, second) == together
