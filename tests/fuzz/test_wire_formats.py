"""The three /v1 wire formats' request bodies fuzzed over real HTTP against a running gateway
(the e2e harness: a daphne process and the fake upstream).

Hypothesis draws bodies near each format's shape (every field the gateway reads, with values of
any JSON type, extra members of any depth, duplicate keys) and mangles some of them (cut short,
a byte changed, invalid UTF-8). Every answer must be below 500; a refusal must be in its wire
format's error shape and reach no upstream; a served request must reach exactly one.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import Gateway, Route, fake, gateway, make_route, records
from tests.e2e.hostile_support import ANTHROPIC, SURFACES, Surface, assert_wire_error
from tests.fuzz.conftest import PROFILE, counted

__all__ = ["fake", "gateway"]  # the e2e fixtures, used here by name

pytestmark = [pytest.mark.fuzz, pytest.mark.e2e]

MODEL = "@MODEL@"
WIRE_EXAMPLES = {"ci": 40, "long": 1_000}
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
# Depths either side of the limit (64) and of orjson's own (254 to write, 1 024 to read).
DEEP = st.one_of(
    st.sampled_from([64, 65, 254, 255, 1024, 1025]), st.integers(min_value=1, max_value=1100)
).map(lambda n: "[" * n + "]" * n)
FIELDS = (
    *("model", "messages", "input", "stream", "tools", "max_tokens", "previous_response_id"),
    *("response_format", "text", "stream_options", "tool_choice", "metadata", "n", "user"),
    *("max_completion_tokens", "max_output_tokens", "system", "instructions"),
)
# An object whose ``type`` (or ``format.type``) is any JSON value: the shape of the members the
# gateway reads a kind from (``response_format``, ``text``, ``tool_choice``, content parts).
TYPED = st.fixed_dictionaries(
    {"type": JSON_VALUES}, optional={"format": st.fixed_dictionaries({"type": JSON_VALUES})}
)


@st.composite
def payloads(draw: st.DrawFn, surface: Surface) -> bytes:
    """A body near ``surface``'s shape: its valid fields, some replaced, dropped or added."""
    payload: dict[str, Any] = surface.body(MODEL)
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        if draw(st.booleans()):
            payload.pop(name, None)
        else:
            payload[name] = draw(st.one_of(JSON_VALUES, TYPED))
    for name, value in draw(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3)).items():
        payload.setdefault(name, value)
    body = json.dumps(payload).encode()  # not orjson: it refuses integers past 64 bits
    if draw(st.integers(min_value=0, max_value=3)) == 0:  # a member nested 1 to 1 100 deep
        body = body[:-1] + b', "deep": ' + draw(DEEP).encode() + b"}"
    if draw(st.integers(min_value=0, max_value=9)) == 0:  # a duplicate key, written first
        body = b'{"model": ' + json.dumps(draw(JSON_VALUES)).encode() + b", " + body[1:]
    return draw(_mangled(body))


@st.composite
def _mangled(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` as it is (mostly), cut short, with one byte changed, or with invalid UTF-8."""
    how = draw(st.sampled_from(["as is"] * 6 + ["cut", "byte", "utf-8"]))
    at = draw(st.integers(min_value=0, max_value=len(body)))
    if how == "cut":
        return body[:at]
    if how == "byte":
        return body[:at] + bytes([draw(st.integers(0, 255))]) + body[at + 1 :]
    if how == "utf-8":
        return body[:at] + b"\xff\xc3\x28" + body[at:]
    return body


@pytest.fixture(scope="module")
def routes(gateway: Gateway, fake: FakeUpstream) -> dict[str, Route]:
    openai = make_route(gateway, fake)
    return {
        surface.name: make_route(gateway, fake, wire_format=ANTHROPIC)
        if surface.wire_format == ANTHROPIC
        else openai
        for surface in SURFACES
    }


def _calls(fake: FakeUpstream, route: Route) -> int:
    return len([r for r in records(fake, route, path="") if r.method == "POST"])


def _exchange(
    gateway: Gateway, fake: FakeUpstream, route: Route, surface: Surface, body: bytes
) -> None:
    content = body.replace(MODEL.encode(), route.model().encode())
    before = _calls(fake, route)
    headers = {"authorization": f"Bearer {route.key}", "content-type": "application/json"}
    response = httpx.post(
        f"{gateway.url}{surface.path}", content=content, headers=headers, timeout=30
    )
    assert response.status_code < 500, response.text[:300]
    served = 200 <= response.status_code < 300
    if not served:
        assert_wire_error(response, response.status_code, surface.wire_format)
    assert _calls(fake, route) - before == (1 if served else 0), response.status_code


# Each example is a real HTTP exchange: fewer than the pure properties' in either profile.
FUZZ_SETTINGS = settings(
    max_examples=WIRE_EXAMPLES[PROFILE],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _fuzz(surface: Surface) -> Any:
    """The property for ``surface``, counted under ``wire_format_<name>``."""

    def run(gateway: Gateway, fake: FakeUpstream, routes: dict[str, Route], body: bytes) -> None:
        _exchange(gateway, fake, routes[surface.name], surface, body)

    run.__name__ = f"test_wire_format_{surface.name}"
    return FUZZ_SETTINGS(given(body=payloads(surface))(counted(run)))


test_wire_format_chat = _fuzz(SURFACES[0])
test_wire_format_responses = _fuzz(SURFACES[1])
test_wire_format_messages = _fuzz(SURFACES[2])
