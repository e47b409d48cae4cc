"""Reading a target's tool limit from the 400 that refuses too many tools."""

from __future__ import annotations

import pytest

from resilience.domain.attempts.tool_limit import tool_limit


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("too many tools: this model supports at most 128 tools (max 128), got 200", 128),
        (
            "Invalid 'tools': array too long. Expected an array with maximum length 128, "
            "but got an array with length 200 instead.",
            128,
        ),
        ("tools: at most 64 tools are supported", 64),
        ("The maximum number of tools is 20", 20),
        ("Too many tools were provided", None),  # a refusal, but no number to learn
        ("This model's maximum context length is 8192 tokens", None),
        ("invalid temperature: max 2", None),
    ],
)
def test_tool_limit(text: str, limit: int | None) -> None:
    assert tool_limit(text) == limit
