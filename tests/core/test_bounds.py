"""Pure tests of the bounds on client input: nesting depth, clipped echoes, header text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniroute.core.bounds import (
    MAX_ECHO_CHARS,
    clip,
    header_text,
    is_header_value,
    nesting_exceeds,
    read_nesting_exceeds,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4)
    ),
    max_leaves=40,
)


def nested(depth: int, opener: str = "[") -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if opener == "[" else {"k": value}
    return value


@pytest.mark.parametrize("opener", ["[", "{"])
@pytest.mark.parametrize(("depth", "exceeds"), [(1, False), (64, False), (65, True), (5000, True)])
def test_nesting_is_counted_in_objects_and_arrays(opener: str, depth: int, exceeds: bool) -> None:
    assert nesting_exceeds(nested(depth, opener), 64) is exceeds


def test_scalars_and_wide_values_do_not_exceed() -> None:
    assert not nesting_exceeds("x", 1)
    assert not nesting_exceeds({"a": [1] * 100_000, "b": {"c": [{}] * 1000}}, 4)
    assert nesting_exceeds({"a": 1, "b": [1, [2, [3]]]}, 3)


def depth(value: Any) -> int:
    """How deep ``value`` nests, by the definition (a scalar 0, a container 1 + its deepest)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@given(JSON_VALUES, st.integers(min_value=1, max_value=8))
def test_nesting_agrees_with_the_definition(value: Any, limit: int) -> None:
    assert nesting_exceeds(value, limit) is (depth(value) > limit)


@given(JSON_VALUES, st.integers(min_value=1, max_value=8))
def test_nesting_read_from_bytes_agrees_with_the_definition(value: Any, limit: int) -> None:
    raw = _dumps(value)
    assert read_nesting_exceeds(raw, value, limit) is (depth(value) > limit)


def test_brackets_in_strings_only_make_the_walk_happen() -> None:
    shallow = {"text": "[[[[{{{{"}
    assert not read_nesting_exceeds(_dumps(shallow), shallow, 2)
    deep = nested(3)
    assert read_nesting_exceeds(_dumps(deep), deep, 2)
    assert not read_nesting_exceeds(b"[[[1]]]", deep, 3)  # three brackets: never walked


class CountedBytes(bytes):
    """Bytes that remember how often they were searched."""

    counts = 0

    def count(self, *args: Any) -> int:
        type(self).counts += 1
        return super().count(*args)


def test_bytes_no_longer_than_the_limit_are_not_even_searched() -> None:
    CountedBytes.counts = 0
    deep = nested(3)
    assert not read_nesting_exceeds(CountedBytes(b"[[[1]]]"), deep, 7)  # 7 bytes: 7 at most
    assert CountedBytes.counts == 0
    assert not read_nesting_exceeds(CountedBytes(b"[[[1]]]"), deep, 6)
    assert CountedBytes.counts == 2  # one search for each bracket


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_clip_keeps_short_text_and_marks_a_cut() -> None:
    assert clip("gpt-4o") == "gpt-4o"
    assert clip("m" * MAX_ECHO_CHARS) == "m" * MAX_ECHO_CHARS
    clipped = clip("m" * 1_000_000)
    assert len(clipped) == MAX_ECHO_CHARS and clipped.endswith("...")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("target=acme/gpt-4o", b"target=acme/gpt-4o"),
        ("a\r\nx-evil: 1", b"a\\x0d\\x0ax-evil: 1"),
        ("caf\u00e9 \u2603", b"caf\\xe9 \\u2603"),
        ("nul\x00tab\t", b"nul\\x00tab\\x09"),
    ],
)
def test_header_text_is_printable_ascii(text: str, expected: bytes) -> None:
    assert header_text(text) == expected


@pytest.mark.parametrize(
    ("text", "sendable"),
    [
        ("sk-ant-0123 Bearer x/y+z=", True),
        ("2023-06-01", True),
        ("", True),
        ("caf\u00e9", False),  # not ASCII
        ("a\r\nX-Injected: 1", False),  # a line break would end the header
        ("tab\there", False),
        ("nul\x00", False),
        ("del\x7f", False),
        (" lead", False),  # the wire would not keep a space at either end
        ("trail ", False),
    ],
)
def test_is_header_value(text: str, sendable: bool) -> None:
    assert is_header_value(text) is sendable


@given(st.text(max_size=20))
def test_what_is_a_header_value_is_written_as_it_is(text: str) -> None:
    if is_header_value(text):
        assert header_text(text) == text.encode("ascii")
