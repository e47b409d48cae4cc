"""The trusted-origins list and the origin rule (pure)."""

from __future__ import annotations

import pytest

from omniroute.core.origins import origin_accepted, parse_trusted_origins


def test_the_list_is_comma_separated_and_lower_cased() -> None:
    parsed = parse_trusted_origins(" https://Gateway.Example , http://127.0.0.1:8443,,")
    assert parsed == ["https://gateway.example", "http://127.0.0.1:8443"]
    assert parse_trusted_origins("") == []
    assert parse_trusted_origins("https://*.example.org") == ["https://*.example.org"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("gateway.example", "scheme://host"),
        ("ftp://gateway.example", "scheme://host"),
        ("https://", "scheme://host"),
        ("https://gateway.example/", "no path"),
        ("https://gateway.example/admin", "no path"),
        ("https://user@gateway.example", "no path"),
        ("https://gate*.example", "wildcard"),
        ("https://gateway.example:port", "not an origin"),
    ],
)
def test_a_malformed_entry_is_refused_by_name(entry: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        parse_trusted_origins(f"https://fine.example,{entry}")
    assert repr(entry.lower()) in str(refused.value) or repr(entry) in str(refused.value)


OWN = "https://gateway.example"


@pytest.mark.parametrize(
    ("origin", "own", "trusted", "accepted"),
    [
        (OWN, OWN, [], True),
        ("http://gateway.example", OWN, [], False),  # the scheme counts
        ("https://gateway.example:8443", OWN, [], False),  # so does the port
        ("https://evil.example", OWN, [], False),
        (OWN, None, [], False),  # a host the gateway does not serve has no own origin
        (OWN, None, [OWN], True),
        ("https://evil.example", OWN, [OWN], False),
        ("https://a.example.org", OWN, ["https://*.example.org"], True),
        ("https://example.org", OWN, ["https://*.example.org"], True),
        ("https://a.b.example.org", OWN, ["https://*.example.org"], True),
        ("http://a.example.org", OWN, ["https://*.example.org"], False),
        ("https://badexample.org", OWN, ["https://*.example.org"], False),
        ("https://a.example.org:8443", OWN, ["https://*.example.org"], False),
        ("https://a.example.org:8443", OWN, ["https://*.example.org:8443"], True),
        ("null", OWN, [OWN], False),
    ],
)
def test_the_rule(origin: str, own: str | None, trusted: list[str], accepted: bool) -> None:
    assert origin_accepted(origin, own_origin=own, trusted=trusted) is accepted
