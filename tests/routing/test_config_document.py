"""The configuration document's pure parts: values, secret variables, reading and the plan."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from routing.config_document import schema as s
from routing.config_document.errors import ConfigError
from routing.config_document.located import dump_yaml, load_yaml
from routing.config_document.plan import plan_build
from routing.config_document.references import (
    SECRET_FIELDS,
    references_write,
    variables_assign,
)
from routing.config_document.values import moment, price


@pytest.mark.parametrize(
    ("raw", "written"),
    [
        (None, None),
        ("0.15", "0.1500"),
        (2, "2.0000"),
        (0.1, "0.1000"),
    ],
)
def test_a_price_is_written_with_four_places(raw: Any, written: str | None) -> None:
    assert price(raw) == written


def test_a_moment_is_written_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))

    assert moment(datetime(2027, 1, 31, 2, 0, tzinfo=plus_two)) == "2027-01-31T00:00:00Z"
    assert moment("2027-01-31T00:00:00+00:00") == "2027-01-31T00:00:00Z"
    with pytest.raises(ValueError, match="time zone"):
        moment("2027-01-31T00:00:00")


@pytest.mark.parametrize("raw", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00"])
def test_a_moment_past_the_utc_calendar_is_out_of_range(raw: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        moment(raw)


def test_connections_whose_names_read_alike_get_distinct_variables() -> None:
    stems = variables_assign([("a-b", "c"), ("a_b", "c"), ("acme", "primary")])

    assert stems == {
        ("a-b", "c"): "OMNIROUTE_PROVIDER_SECRET_A_B__C",
        ("a_b", "c"): "OMNIROUTE_PROVIDER_SECRET_A_B__C_2",
        ("acme", "primary"): "OMNIROUTE_PROVIDER_SECRET_ACME__PRIMARY",
    }


@pytest.mark.parametrize(
    "names",
    [["x", "x refresh"], ["x refresh", "x"], ["y", "y-proxy-url"], ["y-proxy-url", "y"]],
)
def test_no_two_connections_share_a_variable_with_its_suffix(names: list[str]) -> None:
    """``x``'s refresh token and ``x refresh``'s key once had one variable: imported again,
    one connection's secret became the other's."""
    stems = variables_assign([("acme", name) for name in names])

    variables = [stem + suffix for stem in stems.values() for suffix in SECRET_FIELDS.values()]
    assert len(variables) == len(set(variables))


def test_an_export_writes_references_for_every_secret() -> None:
    connection = {
        "name": "c",
        "proxy_url": "http://user:pw@proxy.test:3128",
        "secret": "sk-1",
        "refresh_secret": None,
    }

    assert references_write(connection, "OMNIROUTE_PROVIDER_SECRET_X") == {
        "name": "c",
        "proxy_url": "${ENV:OMNIROUTE_PROVIDER_SECRET_X_PROXY_URL}",
        "secret": "${ENV:OMNIROUTE_PROVIDER_SECRET_X}",
    }
    plain_proxy = {"proxy_url": "http://proxy.test:3128"}
    assert references_write(plain_proxy, "V") == plain_proxy


def test_every_problem_of_a_file_is_named_with_its_line() -> None:
    text = "providers:\n  - slug: acme\n    colour: red\n  - name: B\nsurprise: 1\n"
    raw, lines = load_yaml(text)

    with pytest.raises(ConfigError) as raised:
        s.document_read(raw, lines)

    assert raised.value.describe("f.yaml").splitlines() == [
        "f.yaml:5: surprise: unknown section",
        "f.yaml:3: providers[0].colour: unknown field",
        "f.yaml:2: providers[0].name: is required",
        "f.yaml:2: providers[0].category: is required",
        "f.yaml:2: providers[0].base_url: is required",
        "f.yaml:4: providers[1].slug: is required",
        "f.yaml:4: providers[1].category: is required",
        "f.yaml:4: providers[1].base_url: is required",
    ]


def _document(**sections: Any) -> s.Document:
    return s.document_read(sections)


def test_the_plan_lists_changed_fields_and_leaves_absent_sections_alone() -> None:
    flag = {"name": "emergency_fallback", "value": "openai=a/m"}
    current = _document(feature_flags=[flag], combos=[{"name": "main"}])
    desired = _document(feature_flags=[{**flag, "enabled": False}, {"name": "other"}])

    plan = plan_build(current, desired, prune=True)

    assert plan.lines() == [
        "~ feature_flags emergency_fallback: enabled",
        "+ feature_flags other",
    ]


def test_a_secret_left_out_keeps_the_stored_one() -> None:
    connection = {"provider": "p", "name": "c"}
    current = _document(connections=[{**connection, "secret": "sk-1"}])

    assert not plan_build(current, _document(connections=[connection]), prune=False)
    cleared = _document(connections=[{**connection, "secret": ""}])
    assert plan_build(current, cleared, prune=False).lines() == ["~ connections p/c: secret"]


def test_the_settings_patch_removes_what_the_document_no_longer_sets() -> None:
    current = s.Document({}, {"attempts": {"retriesPerTarget": 2, "deadlineMs": 9000}})
    desired = s.Document({}, {"attempts": {"retriesPerTarget": 2}})

    plan = plan_build(current, desired, prune=False)

    assert plan.settings is not None
    assert plan.settings.patch == {"attempts": {"deadlineMs": None}}


def test_a_dump_reads_back_to_the_same_document() -> None:
    document = {
        "version": 1,
        "settings": {"b": 1, "a": [1, 2]},
        "names": ["2027-01-01T00:00:00Z", "yes"],
    }

    assert load_yaml(dump_yaml(document))[0] == document


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extras: {when: 2027-01-31}", "holds a date"),
        ("extras: {ratio: .nan}", "NaN or infinity"),
    ],
)
def test_a_free_form_mapping_holds_only_what_json_can(text: str, message: str) -> None:
    raw, lines = load_yaml(f"connections:\n  - provider: p\n    name: c\n    {text}\n")

    with pytest.raises(ConfigError, match=message) as raised:
        s.document_read(raw, lines)

    assert raised.value.problems[0].line == 4
    assert raised.value.problems[0].path == "connections[0].extras"
