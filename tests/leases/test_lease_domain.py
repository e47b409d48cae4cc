"""The pure lease checks (and routing's facts they are checked against): managed pools, the lease
headers, supported routes, the leased plan, the capacity answer and the lifecycle bodies."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from leases.domain.actions import (
    LeaseAction,
    LeaseRequest,
    is_json_media_type,
    lifecycle_body,
    parse_lease_request,
    status_body,
)
from leases.domain.claims import (
    LeaseClaim,
    capacity_error,
    check_active,
    check_lease_key,
    foreign_holds,
    lease_claim,
    leased_targets,
    transition_reason,
)
from leases.domain.states import EndReason, LeaseState
from routing.domain.client.catalog import model_ids
from routing.domain.client.errors import GatewayError
from routing.domain.config.snapshot import (
    ComboInfo,
    ComboStep,
    ConfigSnapshot,
    ConnectionInfo,
    KeyInfo,
    ProviderInfo,
    managed_connection_set,
)
from routing.domain.config.vocabulary import Scope, Strategy, WireFormat
from routing.domain.plan.planning import Target, plan_route
from routing.lease_routes import acquire_candidates, check_lease_model, check_route
from tests.routing.lease_support import OWNER, hashed, lease_headers

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def provider(slug: str, wire_format: str = WireFormat.OPENAI) -> ProviderInfo:
    return ProviderInfo(slug, slug.title(), "api_key", f"https://{slug}.test/v1", wire_format)


def conn(id: int, provider: str) -> ConnectionInfo:
    return ConnectionInfo(
        id, provider, f"{provider}-{id}", id, f"https://{provider}.test", "api_key"
    )


def key(id: int = 1, *, managed: bool = False, connections: Iterable[int] = ()) -> KeyInfo:
    scopes = frozenset({Scope.LEASE_EXCLUSIVE.value}) if managed else frozenset()
    return KeyInfo(id, "k", "sk-omr-x", scopes, (), frozenset(connections), True, None, None)


def combo(name: str, strategy: str, *steps: ComboStep) -> ComboInfo:
    return ComboInfo(name=name, strategy=strategy, steps=steps)


def snapshot(*combos: ComboInfo, managed: Iterable[int] = (3, 4)) -> ConfigSnapshot:
    """alpha (1, 2: ordinary) and beta (3, 4: managed), both OpenAI-format; anth (5)."""
    return ConfigSnapshot(
        providers={
            p.slug: p
            for p in (provider("alpha"), provider("beta"), provider("anth", WireFormat.ANTHROPIC))
        },
        connections={
            "alpha": (conn(1, "alpha"), conn(2, "alpha")),
            "beta": (conn(3, "beta"), conn(4, "beta")),
            "anth": (conn(5, "anth"),),
        },
        combos={c.name: c for c in combos},
        managed_connections=frozenset(managed),
    )


BOTH = combo("both", Strategy.PRIORITY, ComboStep("beta", "m"), ComboStep("alpha", "m"))


def ids(targets: Iterable[Target]) -> list[int]:
    return [t.connection.id for t in targets]


# --- managed connections leave the ordinary pools ------------------------------------------


def test_the_managed_set_is_the_union_of_usable_managed_keys_allow_lists() -> None:
    past = NOW - timedelta(seconds=1)
    keys = [
        key(1, managed=True, connections=(3,)),
        key(2, managed=True, connections=(4, 5)),
        replace(key(3, managed=True, connections=(6,)), revoked_at=past),
        replace(key(4, managed=True, connections=(7,)), expires_at=past),
        replace(key(5, managed=True, connections=(8,)), is_active=False),
        key(6, connections=(1,)),  # ordinary: its allow-list reserves nothing
    ]
    assert managed_connection_set(keys, NOW) == {3, 4, 5}


def test_an_ordinary_key_never_plans_on_a_managed_connection() -> None:
    snap = snapshot(
        combo("both", Strategy.PRIORITY, ComboStep("beta", "m"), ComboStep("alpha", "m"))
    )
    assert ids(plan_route(snap, "both", key()).targets) == [1, 2]
    assert ids(plan_route(snap, "both", key(connections=(2, 3))).targets) == [2]
    with pytest.raises(GatewayError) as raised:
        plan_route(snap, "beta/m", key())
    assert raised.value.code == "all_accounts_inactive"


def test_a_managed_key_plans_on_its_own_connections_only() -> None:
    snap = snapshot(
        combo("both", Strategy.PRIORITY, ComboStep("beta", "m"), ComboStep("alpha", "m"))
    )
    managed = key(managed=True, connections=(4, 1))
    assert ids(plan_route(snap, "both", managed).targets) == [4, 1]


def test_the_model_list_of_an_ordinary_key_leaves_managed_connections_out() -> None:
    snap = replace(
        snapshot(),
        connections={
            "alpha": (replace(conn(1, "alpha"), served_models=("a",)),),
            "beta": (replace(conn(3, "beta"), served_models=("b",)),),
        },
    )
    assert model_ids(snap, key()) == ["alpha/a"]
    assert model_ids(snap, key(managed=True, connections=(3,))) == ["beta/b"]


# --- the lease headers of a managed request --------------------------------------------------


def test_an_ordinary_key_needs_no_lease_headers() -> None:
    assert lease_claim(key(), []) is None


def test_a_managed_request_names_its_lease_by_owner_hash() -> None:
    claim = lease_claim(key(7, managed=True, connections=(3,)), lease_headers(OWNER, 42))
    assert claim == LeaseClaim(hashed(OWNER), 42, 7)
    assert OWNER not in repr(claim)


@pytest.mark.parametrize(
    ("owner", "generation", "code"),
    [
        (None, 1, "LEASE_CONTEXT_REQUIRED"),
        ("  ", 1, "LEASE_CONTEXT_REQUIRED"),
        (OWNER[:-1], 1, "LEASE_CONTEXT_INVALID"),
        (OWNER + "A", 1, "LEASE_CONTEXT_INVALID"),
        ("vlo_" + "*" * 43, 1, "LEASE_CONTEXT_INVALID"),
        ("sess-123", 1, "LEASE_CONTEXT_INVALID"),
        (OWNER, "0", "LEASE_CONTEXT_INVALID"),
        (OWNER, "01", "LEASE_CONTEXT_INVALID"),
        (OWNER, "-1", "LEASE_CONTEXT_INVALID"),
        (OWNER, "1.0", "LEASE_CONTEXT_INVALID"),
        (OWNER, str(2**53), "LEASE_CONTEXT_INVALID"),
    ],
)
def test_lease_headers_are_required_and_well_formed(
    owner: str | None, generation: str | int | None, code: str
) -> None:
    with pytest.raises(GatewayError) as raised:
        lease_claim(key(managed=True, connections=(3,)), lease_headers(owner, generation))
    assert (raised.value.status, raised.value.code) == (400, code)
    assert raised.value.error_type == "lease_error"


@pytest.mark.parametrize("generation", [None, "", "   ", "abc", "0", "-1"])
def test_with_an_owner_a_missing_or_malformed_generation_is_invalid_not_required(
    generation: str | None,
) -> None:
    with pytest.raises(GatewayError) as raised:
        lease_claim(key(managed=True, connections=(3,)), lease_headers(OWNER, generation))
    assert (raised.value.status, raised.value.code) == (400, "LEASE_CONTEXT_INVALID")


@pytest.mark.parametrize("generation", [None, "", "abc", 1])
@pytest.mark.parametrize("owner", [None, "", "  "])
def test_without_an_owner_the_lease_context_is_required(
    owner: str | None, generation: str | int | None
) -> None:
    with pytest.raises(GatewayError) as raised:
        lease_claim(key(managed=True, connections=(3,)), lease_headers(owner, generation))
    assert (raised.value.status, raised.value.code) == (400, "LEASE_CONTEXT_REQUIRED")


def test_a_managed_key_without_allowed_connections_is_misconfigured() -> None:
    with pytest.raises(GatewayError) as raised:
        lease_claim(key(managed=True), lease_headers(OWNER, 1))
    assert (raised.value.status, raised.value.code) == (403, "LEASE_KEY_CONFIGURATION_INVALID")


# --- routes a managed key may take -----------------------------------------------------------


def single_step(strategy: str) -> ComboInfo:
    return combo("c", strategy, ComboStep("beta", "m"))


@pytest.mark.parametrize(
    "combos",
    [
        (single_step(Strategy.FUSION),),
        (single_step(Strategy.CONTEXT_RELAY),),
        (combo("c", Strategy.PIPELINE, ComboStep("beta", "m"), ComboStep("beta", "n")),),
        (combo("c", Strategy.PRIORITY, ComboStep("beta", "m", 3), ComboStep("beta", "m", 4)),),
        (
            combo("c", Strategy.PRIORITY, ComboStep("", "", combo_ref="inner")),
            combo("inner", Strategy.FUSION, ComboStep("beta", "m")),
        ),
        (
            combo(
                "c", Strategy.PRIORITY, ComboStep("beta", "m", 3), ComboStep("", "", combo_ref="i")
            ),
            combo("i", Strategy.PRIORITY, ComboStep("beta", "m", 4)),
        ),
    ],
    ids=["fusion", "context-relay", "pipeline", "pinned-apart", "nested-fusion", "nested-pinned"],
)
def test_fan_out_routes_are_refused_before_dispatch(combos: tuple[ComboInfo, ...]) -> None:
    snap = snapshot(*combos)
    plan = plan_route(snap, "c", key(managed=True, connections=(3, 4)))
    with pytest.raises(GatewayError) as raised:
        check_route(snap, plan)
    assert (raised.value.status, raised.value.code) == (409, "LEASE_UNSUPPORTED_ROUTE")


@pytest.mark.parametrize(
    "strategy", [Strategy.PRIORITY, Strategy.ROUND_ROBIN, Strategy.PIPELINE, Strategy.WEIGHTED]
)
def test_one_connection_at_a_time_routes_are_allowed(strategy: str) -> None:
    snap = snapshot(combo("c", strategy, ComboStep("beta", "m", 3)))
    check_route(snap, plan_route(snap, "c", key(managed=True, connections=(3,))))
    check_route(snap, plan_route(snap, "beta/m", key(managed=True, connections=(3,))))


# --- the active lease and the leased plan ----------------------------------------------------


class Active:
    def __init__(self, generation: int = 2, api_key_id: int = 7, connection_id: int = 4) -> None:
        self.generation, self.api_key_id, self.connection_id = generation, api_key_id, connection_id


@pytest.mark.parametrize(
    ("active", "pinned", "code"),
    [
        (None, (), "LEASE_REQUIRED"),
        (Active(generation=1), (), "LEASE_FENCE_STALE"),
        (Active(api_key_id=8), (), "LEASE_FENCE_STALE"),
        (Active(), (3,), "LEASE_CONNECTION_MISMATCH"),
    ],
)
def test_the_active_lease_must_match_the_claim(
    active: Active | None, pinned: tuple[int, ...], code: str
) -> None:
    with pytest.raises(GatewayError) as raised:
        check_active(LeaseClaim(hashed(OWNER), 2, 7), active, pinned)
    assert (raised.value.status, raised.value.code) == (409, code)


def test_a_matching_lease_gives_its_binding() -> None:
    assert check_active(LeaseClaim(hashed(OWNER), 2, 7), Active(), (4,)) == 4


def test_the_plan_is_the_binding_then_the_free_connections_in_order() -> None:
    snap = snapshot(combo("c", Strategy.PRIORITY, ComboStep("alpha", "m"), ComboStep("beta", "m")))
    plan = plan_route(snap, "c", key(managed=True, connections=(1, 2, 3, 4)))
    assert ids(leased_targets(plan.targets, 3, held={2})) == [3, 1, 4]
    assert ids(leased_targets(plan.targets, 9, held={1})) == [2, 3, 4]


def test_only_other_owners_leases_hold_a_connection() -> None:
    mine, theirs = hashed(OWNER), "f" * 64
    occupancy = {3: (mine, NOW), 4: (theirs, NOW + timedelta(seconds=5))}
    assert foreign_holds(occupancy, mine) == {4: NOW + timedelta(seconds=5)}


def test_capacity_answers_429_with_the_first_expiry_and_no_identities() -> None:
    held = {3: NOW + timedelta(seconds=90.2), 4: NOW + timedelta(seconds=30.5)}
    error = capacity_error((3, 4), held, NOW)
    body = orjson.loads(error.body())
    assert (error.status, error.headers) == (429, {"retry-after": "31"})
    assert body == {
        "error": {
            "message": "Exclusive managed session capacity is temporarily unavailable",
            "type": "lease_error",
            "code": "LEASE_CAPACITY_UNAVAILABLE",
        },
        "state": "WAITING_FOR_CAPACITY",
        "reason": "NO_FREE_ELIGIBLE_CONNECTION",
        "retryAfter": 31,
        "eligibleCount": 2,
        "freeCount": 0,
    }


@pytest.mark.parametrize(("seconds", "told"), [(0.2, 1), (-5, 1), (7200, 3600)])
def test_capacity_retry_after_is_clamped(seconds: float, told: int) -> None:
    error = capacity_error((3,), {3: NOW + timedelta(seconds=seconds)}, NOW)
    assert orjson.loads(error.body())["retryAfter"] == told == int(error.headers["retry-after"])


def test_why_a_lease_moves() -> None:
    snap = snapshot()
    targets = plan_route(snap, "beta/m", key(managed=True, connections=(3, 4))).targets
    assert transition_reason(9, targets, ()) is EndReason.MODEL_INELIGIBLE
    assert transition_reason(3, targets, (3,)) is EndReason.CONNECTION_INELIGIBLE
    assert transition_reason(3, targets, ()) is EndReason.HEALTH_OR_COOLDOWN


# --- the lifecycle API's pure parts ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"action": "acquire", "model": "  beta/m  "}, LeaseRequest(LeaseAction.ACQUIRE, "beta/m")),
        ({"action": "status", "generation": 3}, LeaseRequest(LeaseAction.STATUS, generation=3)),
        (
            {"action": "renew", "generation": 2**53 - 1, "extra": 1},
            LeaseRequest(LeaseAction.RENEW, generation=2**53 - 1),
        ),
        (
            {"action": "release", "generation": 1},
            LeaseRequest(LeaseAction.RELEASE, generation=1, reason=EndReason.OWNER_EXIT),
        ),
        (
            {"action": "release", "generation": 1, "reason": "CLIENT_CANCELLED"},
            LeaseRequest(LeaseAction.RELEASE, generation=1, reason=EndReason.CLIENT_CANCELLED),
        ),
    ],
)
def test_valid_lease_actions(body: dict[str, Any], expected: LeaseRequest) -> None:
    assert parse_lease_request(orjson.dumps(body)) == expected


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'"acquire"',
        b"{}",
        b'{"action": "steal"}',
        b'{"action": ["acquire"]}',
        b'{"action": "acquire"}',
        b'{"action": "acquire", "model": "  "}',
        orjson.dumps({"action": "acquire", "model": "m" * 513}),
        b'{"action": "acquire", "model": 5}',
        b'{"action": "status"}',
        b'{"action": "status", "generation": 0}',
        b'{"action": "renew", "generation": "1"}',
        b'{"action": "renew", "generation": true}',
        b'{"action": "renew", "generation": 1.0}',
        orjson.dumps({"action": "status", "generation": 2**53}),
        b'{"action": "release", "generation": 1, "reason": "TTL_EXPIRED"}',
        b'{"action": "release", "generation": 1, "reason": ["OWNER_EXIT"]}',
    ],
)
def test_invalid_lease_actions_are_400(body: bytes) -> None:
    with pytest.raises(GatewayError) as raised:
        parse_lease_request(body)
    assert (raised.value.status, raised.value.code) == (400, "LEASE_ACTION_INVALID")


@pytest.mark.parametrize(
    ("header", "json"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("", False),
        ("text/plain", False),
        ("application/json-patch+json", False),
    ],
)
def test_the_content_type_is_read_by_its_media_type(header: str, json: bool) -> None:
    assert is_json_media_type(header) is json


class View:
    state = LeaseState.ACTIVE
    generation = 2
    acquired_at = NOW
    renewed_at = NOW + timedelta(seconds=1, milliseconds=5)
    expires_at = NOW + timedelta(seconds=121)


def test_the_lifecycle_body_shows_the_lease_and_nothing_of_its_binding() -> None:
    assert lifecycle_body(View()) == {
        "state": "ACTIVE",
        "generation": 2,
        "acquiredAt": "2025-06-01T12:00:00.000Z",
        "renewedAt": "2025-06-01T12:00:01.005Z",
        "expiresAt": "2025-06-01T12:02:01.000Z",
    }
    assert status_body(View(), "  Work account ", "Beta")["connection"] == {
        "displayName": "Work account",
        "provider": "Beta",
    }
    assert status_body(View(), "  ", "Beta")["connection"]["displayName"] is None


def test_the_lease_key_checks() -> None:
    with pytest.raises(GatewayError) as raised:
        check_lease_key(key(connections=(3,)))
    assert (raised.value.status, raised.value.code) == (403, "LEASE_SCOPE_REQUIRED")
    with pytest.raises(GatewayError) as raised:
        check_lease_key(key(managed=True))
    assert (raised.value.status, raised.value.code) == (403, "LEASE_KEY_CONFIGURATION_INVALID")
    check_lease_key(key(managed=True, connections=(3,)))


def test_an_acquire_model_must_resolve_and_be_allowed() -> None:
    snap, managed = snapshot(), key(managed=True, connections=(3,))
    for model in ("nothing", "gone/m", "beta/"):
        with pytest.raises(GatewayError) as raised:
            check_lease_model(snap, managed, model)
        assert (raised.value.status, raised.value.code) == (503, "LEASE_SERVICE_UNAVAILABLE")
    with pytest.raises(GatewayError) as raised:
        check_lease_model(snap, replace(managed, allowed_models=("alpha/*",)), "beta/m")
    assert (raised.value.status, raised.value.code) == (403, "model_not_allowed")


def test_acquire_candidates_are_the_keys_connections_of_every_wire_format_once() -> None:
    snap = snapshot(
        combo(
            "c",
            Strategy.PRIORITY,
            ComboStep("anth", "m"),
            ComboStep("beta", "m"),
            ComboStep("beta", "n"),
        )
    )
    managed = key(managed=True, connections=(5, 4))
    assert ids(acquire_candidates(snap, managed, "c")) == [5, 4]
    assert ids(acquire_candidates(snap, managed, "alpha/m")) == []
