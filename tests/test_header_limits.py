"""The header limits count names and values together, and headers one by one
(``omniroute.header_limits``)."""

from __future__ import annotations

from omniroute.header_limits import MAX_HEADER_BYTES, MAX_HEADERS, headers_exceed


def test_names_and_values_count_together_up_to_the_byte_limit() -> None:
    name = b"x-filler"
    at_limit = [(b"host", b"127.0.0.1"), (name, b"v" * (MAX_HEADER_BYTES - 13 - len(name)))]

    assert not headers_exceed(at_limit)
    assert headers_exceed([*at_limit, (b"a", b"")])  # one byte more, in a name alone
    assert headers_exceed([*at_limit[:1], (name, at_limit[1][1] + b"v")])  # or in a value


def test_more_headers_than_the_limit_exceed_it_whatever_their_size() -> None:
    assert not headers_exceed([(b"a", b"")] * MAX_HEADERS)
    assert headers_exceed([(b"a", b"")] * (MAX_HEADERS + 1))
