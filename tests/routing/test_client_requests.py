"""Parsing Responses and Messages requests, and Anthropic-shaped errors (pure)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from routing.domain.client.errors import GatewayError, anthropic_error_body, error_body
from routing.domain.client.requests import (
    BACKGROUND_WARNING,
    parse_chat_request,
    parse_messages_request,
    parse_responses_request,
)

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"input": "hi"}, "missing_model"),
        ({"model": "a/b"}, "missing_input"),
        ({"model": "a/b", "input": 3}, "invalid_input"),
        ({"model": "a/b", "input": "hi", "stream": "yes"}, "invalid_stream"),
        ({"model": "a/b", "input": "hi", "background": "yes"}, "invalid_background"),
        ({"model": "a/b", "previous_response_id": 4}, "invalid_previous_response_id"),
        ({"model": "a/b", "input": "hi", "tools": {}}, "invalid_tools"),
    ],
)
def test_responses_refusals(body: dict[str, object], code: str) -> None:
    with pytest.raises(GatewayError) as caught:
        parse_responses_request(orjson.dumps(body))

    assert (caught.value.status, caught.value.code) == (400, code)


def test_a_responses_request_read() -> None:
    body = {
        "model": "a/b",
        "input": [{"role": "user", "content": "hi"}],
        "tools": [{}, {}],
        "previous_response_id": "resp_1",
        "stream": True,
    }

    request = parse_responses_request(orjson.dumps(body))

    assert (request.model, request.stream, request.tools) == ("a/b", True, 2)
    assert request.previous_response_id == "resp_1"
    assert request.payload == body and request.warnings == ()


def test_background_is_served_synchronously_with_a_warning() -> None:
    request = parse_responses_request(
        orjson.dumps({"model": "a/b", "input": "hi", "background": True})
    )

    assert "background" not in request.payload
    assert request.warnings == (BACKGROUND_WARNING,)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"model": "a/b"}, "missing_messages"),
        ({"model": "a/b", "messages": MESSAGES, "max_tokens": 0}, "invalid_max_tokens"),
        ({"model": "a/b", "messages": MESSAGES, "max_tokens": "9"}, "invalid_max_tokens"),
    ],
)
def test_messages_refusals(body: dict[str, object], code: str) -> None:
    with pytest.raises(GatewayError) as caught:
        parse_messages_request(orjson.dumps(body))

    assert caught.value.code == code


def test_the_gateway_s_errors_in_anthropic_shape_keep_their_code_and_extras() -> None:
    body = error_body("cooling", "service_unavailable", "all_targets_cooling_down", diagnostics={})

    shaped = orjson.loads(anthropic_error_body(503, body))

    assert shaped == {
        "type": "error",
        "error": {
            "type": "overloaded_error",
            "message": "cooling",
            "code": "all_targets_cooling_down",
        },
        "diagnostics": {},
    }


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (429, "rate_limit_error"),
        (502, "api_error"),
    ],
)
def test_anthropic_error_types_by_status(status: int, kind: str) -> None:
    shaped = orjson.loads(anthropic_error_body(status, error_body("m", "x", "c")))

    assert shaped["error"]["type"] == kind


def test_an_anthropic_upstream_error_is_kept_as_it_is() -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'

    assert anthropic_error_body(529, body) is body


def test_a_body_that_is_not_json_still_becomes_an_anthropic_error() -> None:
    shaped = orjson.loads(anthropic_error_body(502, b"<html>bad gateway</html>"))

    assert shaped["type"] == "error" and shaped["error"]["type"] == "api_error"


@pytest.mark.parametrize(
    "parse", [parse_chat_request, parse_responses_request, parse_messages_request]
)
def test_a_body_nested_past_the_limit_is_refused_by_every_api(parse: Any) -> None:
    body = {"model": "a/b", "messages": MESSAGES, "input": "hi", "metadata": [[["x"]]]}
    assert parse(orjson.dumps(body), max_depth=4).model == "a/b"  # object, list, list, list
    with pytest.raises(GatewayError) as caught:
        parse(orjson.dumps(body), max_depth=3)
    assert (caught.value.status, caught.value.code) == (400, "json_too_deep")
    assert "3 levels" in caught.value.message


@pytest.mark.parametrize(
    ("given", "sent", "hidden"),
    [
        ({}, {"include_usage": True}, True),
        ({"stream_options": None}, {"include_usage": True}, True),
        ({"stream_options": {"include_usage": False}}, {"include_usage": True}, True),
        (  # the client's other stream options are kept
            {"stream_options": {"include_obfuscation": False}},
            {"include_obfuscation": False, "include_usage": True},
            True,
        ),
        ({"stream_options": {"include_usage": True}}, {"include_usage": True}, False),
        ({"stream_options": "odd"}, "odd", False),  # left for the upstream to refuse
    ],
)
def test_a_streamed_chat_request_asks_its_upstream_for_usage(
    given: dict[str, object], sent: object, hidden: bool
) -> None:
    body = {"model": "a/b", "messages": MESSAGES, "stream": True, **given}

    request = parse_chat_request(orjson.dumps(body))

    assert request.payload["stream_options"] == sent
    assert request.hides_usage is hidden


def test_a_plain_chat_request_asks_for_no_usage() -> None:
    request = parse_chat_request(orjson.dumps({"model": "a/b", "messages": MESSAGES}))

    assert "stream_options" not in request.payload and not request.hides_usage
