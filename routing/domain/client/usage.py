"""The tokens an answer's usage block reports (pure).

Chat Completions writes ``prompt_tokens`` / ``completion_tokens``; Messages and Responses
write ``input_tokens`` / ``output_tokens``. Metrics and the request log read the same
:data:`Tokens` of an answer, whole or streamed (docs/operating.md, "Metrics").
"""

from __future__ import annotations

from typing import Any

Tokens = tuple[int | None, int | None]
"""Tokens in and out; ``None`` where the upstream reported no count."""
NO_TOKENS: Tokens = (None, None)


# The most tokens one count may say: the request log's columns hold no more on PostgreSQL,
# and no answer comes near it. A larger number is no count (an upstream's garbage).
MAX_TOKENS = 2**31 - 1


def count(value: object, before: int | None = None) -> int | None:
    """A token count as a usage block gives it (``before`` when it is not a count)."""
    return value if type(value) is int and 0 <= value <= MAX_TOKENS else before


def usage_tokens(usage: Any) -> Tokens:
    """Tokens in and out of one usage block, in either API's names; :data:`NO_TOKENS` when
    it is not one."""
    if type(usage) is not dict:
        return NO_TOKENS
    tokens_in = usage.get("prompt_tokens", usage.get("input_tokens"))
    tokens_out = usage.get("completion_tokens", usage.get("output_tokens"))
    return count(tokens_in), count(tokens_out)


def answer_tokens(answer: Any) -> Tokens:
    """Tokens in and out of a whole answer (a parsed JSON object), from its ``usage``."""
    return usage_tokens(answer.get("usage")) if type(answer) is dict else NO_TOKENS


def added(first: Tokens, second: Tokens) -> Tokens:
    """The tokens of two answers (a stream and its continuation) together."""
    return _sum(first[0], second[0]), _sum(first[1], second[1])


def _sum(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a + b, MAX_TOKENS)
