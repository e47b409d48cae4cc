"""Owner tokens, generation headers, TTL clamping and retry-after (pure, no database)."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from leases.domain.tokens import (
    GENERATION_HEADER,
    OWNER_HEADER,
    clamp_ttl_ms,
    owner_hash,
    owner_is_valid,
    parse_generation,
    retry_after_seconds,
)

VALID_BODY = "A" * 20 + "z" * 10 + "0123456789" + "-_x"  # 43 base64url characters
NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def test_headers_are_lowercase_wire_names() -> None:
    assert OWNER_HEADER == b"x-omniroute-lease-owner"
    assert GENERATION_HEADER == b"x-omniroute-lease-generation"


@pytest.mark.parametrize(
    "value",
    ["vlo_" + VALID_BODY, "vlo_" + "-" * 43, "vlo_" + "_" * 43, "vlo_" + "9" * 43],
)
def test_well_formed_owners(value: str) -> None:
    assert len(value) == 47
    assert owner_is_valid(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "vlo_",
        "vlo_" + VALID_BODY[:-1],  # 42 characters
        "vlo_" + VALID_BODY + "A",  # 44 characters
        "VLO_" + VALID_BODY,
        "vlx_" + VALID_BODY,
        "vlo-" + VALID_BODY,
        VALID_BODY,
        "vlo_" + VALID_BODY[:-1] + "=",  # padding is not base64url's alphabet
        "vlo_" + VALID_BODY[:-1] + "+",
        "vlo_" + VALID_BODY[:-1] + "/",
        "vlo_" + VALID_BODY[:-1] + " ",
        " vlo_" + VALID_BODY,
        "vlo_" + VALID_BODY + "\n",
        "vlo_" + VALID_BODY[:-1] + "é",
        "session-1234",  # a session id is never an owner
    ],
)
def test_malformed_owners(value: str) -> None:
    assert not owner_is_valid(value)


def test_a_non_string_is_not_an_owner() -> None:
    assert not owner_is_valid(None)  # type: ignore[arg-type]
    assert not owner_is_valid(b"vlo_" + VALID_BODY.encode())  # type: ignore[arg-type]


def test_owner_hash_is_lowercase_sha256_hex() -> None:
    token = "vlo_" + VALID_BODY
    digest = owner_hash(token)
    assert digest == hashlib.sha256(token.encode()).hexdigest()
    assert len(digest) == 64 and digest == digest.lower()
    assert token not in digest


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", 1),
        ("42", 42),
        ("9007199254740991", 2**53 - 1),
        ("9007199254740992", None),  # past the largest safe integer
        ("99999999999999999999", None),
        ("0", None),
        ("01", None),
        ("007", None),
        ("-1", None),
        ("+1", None),
        ("1.0", None),
        ("1e3", None),
        (" 1", None),
        ("1 ", None),
        ("1\n", None),
        ("", None),
        ("one", None),
        ("١", None),  # an Arabic-Indic digit: not a decimal digit of the header
        ("0x10", None),
    ],
)
def test_parse_generation(value: str, expected: int | None) -> None:
    assert parse_generation(value) == expected


def test_parse_generation_refuses_non_strings() -> None:
    assert parse_generation(None) is None  # type: ignore[arg-type]
    assert parse_generation(5) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ttl_ms", "expected"),
    [
        (None, 120_000),
        (0, 1_000),
        (-5, 1_000),
        (999, 1_000),
        (1_000, 1_000),
        (45_000, 45_000),
        (1_800_000, 1_800_000),
        (1_800_001, 1_800_000),
        (10**12, 1_800_000),
    ],
)
def test_clamp_ttl_ms(ttl_ms: int | None, expected: int) -> None:
    assert clamp_ttl_ms(ttl_ms) == expected


@pytest.mark.parametrize(
    ("expires_in", "expected"),
    [
        (None, 1),
        (dt.timedelta(seconds=-30), 1),  # already past: come back at once
        (dt.timedelta(0), 1),
        (dt.timedelta(milliseconds=1), 1),
        (dt.timedelta(seconds=1), 1),
        (dt.timedelta(seconds=1, milliseconds=1), 2),  # rounded up
        (dt.timedelta(seconds=119, microseconds=500_000), 120),
        (dt.timedelta(seconds=3_600), 3_600),
        (dt.timedelta(hours=5), 3_600),
    ],
)
def test_retry_after_seconds(expires_in: dt.timedelta | None, expected: int) -> None:
    expires_at = None if expires_in is None else NOW + expires_in
    assert retry_after_seconds(expires_at, NOW) == expected
