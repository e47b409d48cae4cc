"""Per-combo overrides of the attempts settings, pure: strict validation against the settings
schema, the lenient read, and applying them to a policy. The tables walk ``ATTEMPT_FIELDS``, so
a key added to the section is covered without a new test."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from omniroute.core.settings import ROOT_FIELD, SettingsError
from resilience.domain.attempts.policy import AttemptPolicy
from routing.domain.settings.fields import ATTEMPT_FIELDS
from routing.domain.settings.overrides import (
    attempt_override_bounds,
    attempt_override_keys,
    attempt_overrides_read,
    attempt_overrides_validate,
    snake_case,
    with_overrides,
)

KEYS = attempt_override_keys()
BOUNDS = attempt_override_bounds()
INT_KEYS = tuple(BOUNDS)  # the others are switches (true / false)


def _errors(raw: Any) -> dict[str, str]:
    with pytest.raises(SettingsError) as raised:
        attempt_overrides_validate(raw)
    return raised.value.errors


def test_the_keys_are_the_attempts_section() -> None:
    assert KEYS == tuple(path.split(".", 1)[1] for path in ATTEMPT_FIELDS)
    assert {"retriesPerTarget", "backoffBaseMs", "maxRetryAfterWaitMs", "deadlineMs"} <= set(KEYS)
    assert BOUNDS["retriesPerTarget"] == (0, 5)
    assert BOUNDS["hedgeAfterMs"] == (0, 600_000) and BOUNDS["hedgeMaxPercent"] == (0, 100)
    assert set(KEYS) - set(INT_KEYS) == {"hedgeEnabled"}


@pytest.mark.parametrize("key", KEYS)
def test_every_key_names_a_policy_field(key: str) -> None:
    assert snake_case(key) in {f.name for f in fields(AttemptPolicy)}


@pytest.mark.parametrize("key", INT_KEYS)
def test_each_key_takes_its_bounds(key: str) -> None:
    low, high = BOUNDS[key]

    assert attempt_overrides_validate({key: low}) == {key: low}
    assert attempt_overrides_validate({key: high}) == {key: high}


@pytest.mark.parametrize("key", INT_KEYS)
def test_each_key_refuses_values_out_of_its_bounds(key: str) -> None:
    low, high = BOUNDS[key]

    for value in (low - 1, high + 1):
        assert _errors({key: value}) == {key: f"must be between {low} and {high}"}


@pytest.mark.parametrize("value", [True, "3", 2.5, None, [1], {"a": 1}])
def test_a_non_integer_is_refused(value: Any) -> None:
    assert _errors({"retriesPerTarget": value}) == {"retriesPerTarget": "must be an integer"}


def test_a_whole_float_is_the_integer() -> None:
    assert attempt_overrides_validate({"deadlineMs": 5000.0}) == {"deadlineMs": 5000}


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    errors = _errors({"retriesPerTarget": 0, "retries": 2})

    assert list(errors) == ["retries"]
    assert errors["retries"].startswith("unknown key")
    assert all(key in errors["retries"] for key in KEYS)


@pytest.mark.parametrize("raw", [[], "retriesPerTarget=0", 3, None])
def test_a_non_object_is_refused(raw: Any) -> None:
    assert _errors(raw) == {ROOT_FIELD: "must be a JSON object"}


def test_no_overrides_is_valid() -> None:
    assert attempt_overrides_validate({}) == {}


def test_the_read_clamps_known_keys_and_drops_the_rest() -> None:
    stored = {"retriesPerTarget": 99, "backoffBaseMs": "20", "deadlineMs": "soon", "gone": 1}

    assert attempt_overrides_read(stored) == {"retriesPerTarget": 5, "backoffBaseMs": 20}
    assert attempt_overrides_read(["retriesPerTarget"]) == {}


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("retriesPerTarget", "retries_per_target"),
        ("maxRetryAfterWaitMs", "max_retry_after_wait_ms"),
        ("timeToFirstTokenMs", "time_to_first_token_ms"),
        ("deadlineMs", "deadline_ms"),
    ],
)
def test_snake_case(key: str, name: str) -> None:
    assert snake_case(key) == name


def test_with_overrides_replaces_only_the_given_fields() -> None:
    policy = AttemptPolicy(retries_per_target=1, backoff_base_ms=250, deadline_ms=300_000)

    changed = with_overrides(policy, {"retriesPerTarget": 0, "deadlineMs": 60_000})

    assert changed == AttemptPolicy(retries_per_target=0, backoff_base_ms=250, deadline_ms=60_000)
    assert policy.retries_per_target == 1  # a new value; the old one is unchanged


@pytest.mark.parametrize("key", INT_KEYS)
def test_with_overrides_sets_every_key(key: str) -> None:
    low, _ = BOUNDS[key]

    changed = with_overrides(AttemptPolicy(), {key: low})

    assert getattr(changed, snake_case(key)) == low


def test_with_no_overrides_is_the_same_policy() -> None:
    policy = AttemptPolicy()

    assert with_overrides(policy, {}) is policy


def test_with_overrides_refuses_a_key_that_names_no_field() -> None:
    with pytest.raises(ValueError, match="retries"):
        with_overrides(AttemptPolicy(), {"retries": 2})


def test_the_hedge_switch_is_a_boolean() -> None:
    assert attempt_overrides_validate({"hedgeEnabled": False}) == {"hedgeEnabled": False}
    assert _errors({"hedgeEnabled": 0}) == {"hedgeEnabled": "must be a boolean"}
    assert attempt_overrides_read({"hedgeEnabled": False, "hedgeMaxPercent": 250}) == {
        "hedgeEnabled": False,
        "hedgeMaxPercent": 100,
    }
    assert attempt_overrides_read({"hedgeEnabled": "no"}) == {}


def test_a_combo_sets_its_own_hedge_delay_and_share() -> None:
    changed = with_overrides(AttemptPolicy(), {"hedgeAfterMs": 3_000, "hedgeMaxPercent": 50})

    assert (changed.hedge_enabled, changed.hedge_after_ms, changed.hedge_max_percent) == (
        True,
        3_000,
        50,
    )


def test_a_combo_turns_hedging_off_for_itself() -> None:
    assert not with_overrides(AttemptPolicy(), {"hedgeEnabled": False}).hedge_enabled
    assert with_overrides(AttemptPolicy(), {"hedgeAfterMs": 0}).hedge_after_ms == 0


def test_a_combo_cannot_turn_on_hedging_the_global_settings_turned_off() -> None:
    off = AttemptPolicy(hedge_enabled=False)
    never = AttemptPolicy(hedge_after_ms=0)

    assert not with_overrides(off, {"hedgeEnabled": True}).hedge_enabled
    assert with_overrides(never, {"hedgeAfterMs": 5_000}).hedge_after_ms == 0
