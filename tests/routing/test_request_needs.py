"""What a request needs of a model, read by each client API's parser (pure)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.domain.client.requests import (
    parse_chat_request,
    parse_messages_request,
    parse_responses_request,
)
from routing.domain.plan.needs import RequestNeeds, estimate_tokens

TOOL = {"type": "function", "function": {"name": "f", "parameters": {}}}


def chat(**fields: Any) -> RequestNeeds:
    body = {"model": "m", "messages": [{"role": "user", "content": "abcd"}], **fields}
    return parse_chat_request(orjson.dumps(body)).needs


def responses(**fields: Any) -> RequestNeeds:
    return parse_responses_request(orjson.dumps({"model": "m", "input": "abcd", **fields})).needs


def messages(**fields: Any) -> RequestNeeds:
    body = {"model": "m", "messages": [{"role": "user", "content": "abcd"}], **fields}
    return parse_messages_request(orjson.dumps(body)).needs


@pytest.mark.parametrize("parse", [chat, responses, messages])
@pytest.mark.parametrize(
    ("fields", "tools"),
    [
        ({}, False),
        ({"tools": []}, False),
        ({"tools": [TOOL]}, True),
        ({"tools": [TOOL], "tool_choice": "auto"}, True),
        ({"tools": [TOOL], "tool_choice": "required"}, True),
        ({"tools": [TOOL], "tool_choice": "none"}, False),
        ({"tools": [TOOL], "tool_choice": {"type": "none"}}, False),  # Anthropic's spelling
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "f"}}, True),
    ],
)
def test_tools_are_needed_when_declared_and_not_switched_off(
    parse: Any, fields: dict[str, Any], tools: bool
) -> None:
    assert parse(**fields).tools is tools


@pytest.mark.parametrize(
    ("response_format", "structured"),
    [
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}, True),
        ({"type": "json_object"}, True),
        ({"type": "text"}, False),
        (None, False),
        ({"type": []}, False),  # a type that is no string is no format
        ({"type": {"json_object": 1}}, False),
    ],
)
def test_chat_structured_output_is_a_json_response_format(
    response_format: Any, structured: bool
) -> None:
    assert chat(response_format=response_format).structured_output is structured


@pytest.mark.parametrize(
    ("text", "structured"),
    [
        ({"format": {"type": "json_schema", "name": "x", "schema": {}}}, True),
        ({"format": {"type": "text"}}, False),
        ({"verbosity": "low"}, False),
        ("json_schema", False),
        ({"format": {"type": []}}, False),  # a type that is no string is no format
        ({"format": {"type": {"json_schema": 1}}}, False),
    ],
)
def test_responses_structured_output_is_a_json_schema_text_format(
    text: Any, structured: bool
) -> None:
    assert responses(text=text).structured_output is structured


def test_messages_never_needs_structured_output() -> None:
    assert messages(response_format={"type": "json_object"}).structured_output is False


@pytest.mark.parametrize(
    ("parse", "fields", "expected"),
    [
        (chat, {"max_tokens": 100}, 100),
        (chat, {"max_completion_tokens": 50, "max_tokens": 100}, 50),  # the newer name wins
        (chat, {"max_completion_tokens": "50"}, None),
        (chat, {"max_tokens": True}, None),
        (chat, {"max_tokens": 0}, None),
        (chat, {}, None),
        (responses, {"max_output_tokens": 70}, 70),
        (responses, {"max_tokens": 70}, None),  # not a Responses field
        (messages, {"max_tokens": 30}, 30),
    ],
)
def test_the_requested_output_tokens(parse: Any, fields: dict[str, Any], expected: Any) -> None:
    assert parse(**fields).max_output_tokens == expected


def test_chat_input_counts_every_message_s_text() -> None:
    conversation = [
        {"role": "system", "content": "x" * 10},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "y" * 10},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 999}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "z" * 10},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "w" * 9},
    ]

    # 10 + 10 + 10 + 9 bytes of text (the image and the names are not prompt text) → ⌈39/4⌉
    assert chat(messages=conversation).input_tokens == 10


def test_bytes_are_utf8_rounded_up() -> None:
    assert chat(messages=[{"role": "user", "content": "é"}]).input_tokens == 1  # 2 bytes
    assert chat(messages=[{"role": "user", "content": "日本語"}]).input_tokens == 3  # 9 bytes
    assert chat(messages=[{"role": "user", "content": "abcd"}]).input_tokens == 1


def test_responses_input_counts_instructions_and_items() -> None:
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "a" * 8},
                {"type": "input_image", "image_url": "https://x.test/" + "i" * 99},
            ],
        },
        {"type": "function_call_output", "call_id": "c", "output": "b" * 8},
    ]

    assert responses(input=items, instructions="c" * 8).input_tokens == 6


def test_messages_input_counts_the_system_prompt_and_tool_use() -> None:
    conversation = [
        {"role": "user", "content": "a" * 4},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"q": "b"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "c" * 4}],
                }
            ],
        },
    ]
    system = [{"type": "text", "text": "s" * 4}]

    # 4 + len('{"q":"b"}') = 9 + 4 + 4 = 21 bytes → 6
    assert messages(messages=conversation, system=system).input_tokens == 6


def test_deep_nesting_is_counted_without_recursion() -> None:
    nested: Any = "abcd"
    for _ in range(5_000):
        nested = [nested]

    assert estimate_tokens([nested]) == 1


def test_the_needs_know_the_context_they_ask_for() -> None:
    assert RequestNeeds(input_tokens=10, max_output_tokens=5).context_tokens == 15
    assert RequestNeeds(input_tokens=10).context_tokens == 10
