"""What a client asks of ``auto``: the X-OmniRoute-Mode,
X-OmniRoute-Budget and X-OmniRoute-Budget-Fallback headers, refused with a clear 400 when
malformed, and the request's estimated size and cost."""

from __future__ import annotations

import orjson
import pytest

from routing.domain.client.errors import GatewayError
from routing.strategies.auto.request import (
    DEFAULT_OUTPUT_TOKENS,
    AutoMode,
    AutoOptions,
    Budget,
    RequestProfile,
    budget_exceeded,
    estimate_cost,
    estimate_input_tokens,
    parse_auto_headers,
    request_profile,
)


def test_no_header_asks_nothing() -> None:
    assert parse_auto_headers({"content-type": "application/json"}) == AutoOptions()


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("rules", AutoMode.RULES),
        ("score", AutoMode.SCORE),
        ("smart", AutoMode.SMART),
        ("cost", AutoMode.COST),
        ("eco", AutoMode.COST),
        ("latency", AutoMode.LATENCY),
        ("fast", AutoMode.LATENCY),
        ("sla", AutoMode.SLA),
        ("sla-aware", AutoMode.SLA),
        ("lkgp", AutoMode.LKGP),
        (" Fast ", AutoMode.LATENCY),
    ],
)
def test_the_mode_header_names_a_mode_or_an_alias(value: str, mode: AutoMode) -> None:
    assert parse_auto_headers({"X-OmniRoute-Mode": value}).mode is mode


def test_header_names_are_case_insensitive() -> None:
    options = parse_auto_headers({"x-omniroute-budget": "0.5", "X-OMNIROUTE-MODE": "eco"})
    assert options == AutoOptions(AutoMode.COST, Budget(0.5))


@pytest.mark.parametrize(
    ("headers", "code", "named"),
    [
        ({"X-OmniRoute-Mode": "turbo"}, "invalid_auto_mode", "X-OmniRoute-Mode"),
        ({"X-OmniRoute-Mode": ""}, "invalid_auto_mode", "X-OmniRoute-Mode"),
        ({"X-OmniRoute-Budget": "cheap"}, "invalid_budget", "X-OmniRoute-Budget"),
        ({"X-OmniRoute-Budget": "-0.01"}, "invalid_budget", "X-OmniRoute-Budget"),
        ({"X-OmniRoute-Budget": "nan"}, "invalid_budget", "X-OmniRoute-Budget"),
        ({"X-OmniRoute-Budget": "inf"}, "invalid_budget", "X-OmniRoute-Budget"),
        ({"X-OmniRoute-Budget": ""}, "invalid_budget", "X-OmniRoute-Budget"),
        (
            {"X-OmniRoute-Budget": "1", "X-OmniRoute-Budget-Fallback": "lenient"},
            "invalid_budget_fallback",
            "X-OmniRoute-Budget-Fallback",
        ),
    ],
)
def test_a_malformed_header_is_a_400_that_names_it(
    headers: dict[str, str], code: str, named: str
) -> None:
    with pytest.raises(GatewayError) as raised:
        parse_auto_headers(headers)
    assert (raised.value.status, raised.value.code) == (400, code)
    assert named in raised.value.message


@pytest.mark.parametrize(
    ("fallback", "strict"), [(None, False), ("strict", True), ("STRICT", True), ("cheapest", False)]
)
def test_the_budget_and_its_fallback(fallback: str | None, strict: bool) -> None:
    headers = {"X-OmniRoute-Budget": "0.002"}
    if fallback is not None:
        headers["X-OmniRoute-Budget-Fallback"] = fallback
    assert parse_auto_headers(headers).budget == Budget(0.002, strict)


def test_a_fallback_without_a_budget_changes_nothing() -> None:
    assert parse_auto_headers({"X-OmniRoute-Budget-Fallback": "strict"}) == AutoOptions()


def test_a_zero_budget_is_valid() -> None:
    assert parse_auto_headers({"X-OmniRoute-Budget": "0"}).budget == Budget(0.0)


def test_the_input_is_estimated_at_four_characters_a_token() -> None:
    payload = {
        "model": "auto",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "x" * 400}],
    }
    body = orjson.dumps({"messages": payload["messages"]})
    assert estimate_input_tokens(payload) == -(-len(body) // 4)
    assert estimate_input_tokens({}) == 0


@pytest.mark.parametrize(
    ("payload", "cap"),
    [
        ({"max_tokens": 300}, 300),
        ({"max_completion_tokens": 200}, 200),
        ({"max_output_tokens": 100}, 100),
        ({"max_tokens": 0}, None),
        ({"max_tokens": True}, None),
        ({"max_tokens": "9"}, None),
        ({}, None),
    ],
)
def test_the_output_cap_is_read_from_the_request(
    payload: dict[str, object], cap: int | None
) -> None:
    profile = request_profile(payload, tools=3)
    assert (profile.max_output_tokens, profile.tools) == (cap, 3)
    assert profile.output_tokens == (cap or DEFAULT_OUTPUT_TOKENS)


def test_the_cost_is_input_tokens_times_input_price_plus_output_cap_times_output_price() -> None:
    request = RequestProfile(input_tokens=2_000, max_output_tokens=500)
    assert estimate_cost(request, 3.0, 15.0) == pytest.approx((2_000 * 3 + 500 * 15) / 1e6)
    assert estimate_cost(request, 2.0, None) == pytest.approx(2_500 * 2 / 1e6)  # one price
    assert estimate_cost(request, None, 15.0) is None
    uncapped = RequestProfile(input_tokens=0)
    assert estimate_cost(uncapped, 1.0, 1.0) == pytest.approx(DEFAULT_OUTPUT_TOKENS / 1e6)


def test_budget_exceeded_is_a_402_with_an_openai_style_body() -> None:
    error = budget_exceeded(Budget(0.001, strict=True), 0.0042)
    body = orjson.loads(error.body())
    assert error.status == 402
    assert body["error"]["code"] == "budget_exceeded"
    assert body["error"]["type"] == "invalid_request_error"
    assert "$0.004200" in body["error"]["message"]
    assert body["diagnostics"] == {"budgetUsd": 0.001, "cheapestUsd": 0.0042}
