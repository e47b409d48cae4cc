"""Pure routing domain: planning, keys, auth, failover, error bodies, payload and catalog."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from routing.domain.attempts.outcomes import Outcome, OutcomeKind, should_fail_over
from routing.domain.client.catalog import model_ids, model_list
from routing.domain.client.errors import GatewayError, upstream_error_body
from routing.domain.client.requests import parse_chat_request
from routing.domain.config.auth import authenticate, presented_key
from routing.domain.config.keys import hash_key, key_is_usable, model_is_allowed
from routing.domain.config.snapshot import (
    ComboInfo,
    ComboStep,
    ConfigSnapshot,
    ConnectionInfo,
    KeyInfo,
    ProviderInfo,
)
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan import planning
from routing.domain.plan.planning import Target, plan_route
from routing.proxy.payload import encode_for_target

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


# --- builders -------------------------------------------------------------------------------


def provider(slug: str, wire_format: str = WireFormat.OPENAI) -> ProviderInfo:
    return ProviderInfo(slug, slug.title(), "api_key", f"https://{slug}.test/v1", wire_format)


def conn(id: int, provider: str, *served: str) -> ConnectionInfo:
    return ConnectionInfo(
        id=id,
        provider=provider,
        name=f"{provider}-{id}",
        priority=id,
        base_url=f"https://{provider}.test/v1",
        auth_type="api_key",
        secret=f"secret-{id}",
        served_models=served,
    )


def key(
    *,
    models: Iterable[str] = (),
    connections: Iterable[int] = (),
    is_active: bool = True,
    expires_at: datetime | None = None,
    revoked_at: datetime | None = None,
) -> KeyInfo:
    return KeyInfo(
        id=1,
        name="client",
        prefix="sk-omr-xxxxx",
        scopes=frozenset(),
        allowed_models=tuple(models),
        allowed_connections=frozenset(connections),
        is_active=is_active,
        expires_at=expires_at,
        revoked_at=revoked_at,
    )


def combo(name: str, *steps: ComboStep) -> ComboInfo:
    return ComboInfo(name=name, strategy="priority", steps=steps)


ANTH = provider("anth", WireFormat.ANTHROPIC)


def snapshot_with(keys: Iterable[tuple[str, KeyInfo]] = ()) -> ConfigSnapshot:
    """alpha (1 any model, 2 only `small`), beta (3, 4), anth (5, Anthropic wire) and combos."""
    return ConfigSnapshot(
        providers={p.slug: p for p in (provider("alpha"), provider("beta"), ANTH)},
        connections={
            "alpha": (conn(1, "alpha"), conn(2, "alpha", "small")),
            "beta": (conn(3, "beta"), conn(4, "beta")),
            "anth": (conn(5, "anth"),),
        },
        keys_by_hash={hash_key(plaintext): info for plaintext, info in keys},
        combos={
            "duo": combo("duo", ComboStep("beta", "big", 4), ComboStep("alpha", "big")),
            "mixed": combo("mixed", ComboStep("anth", "claude"), ComboStep("alpha", "small")),
            "ghost": combo("ghost", ComboStep("gone", "big")),
        },
    )


SNAPSHOT = snapshot_with()


def described(targets: Iterable[Target]) -> list[tuple[str, int, str, int]]:
    return [(t.provider.slug, t.connection.id, t.model, t.step) for t in targets]


# --- plan_route -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "client", "wire", "expected"),
    [
        ("alpha/small", key(), "openai", [("alpha", 1, "small", 0), ("alpha", 2, "small", 0)]),
        ("alpha/big", key(), "openai", [("alpha", 1, "big", 0)]),  # 2 serves only `small`
        ("beta/big", key(connections=[4]), "openai", [("beta", 4, "big", 0)]),
        ("duo", key(), "openai", [("beta", 4, "big", 0), ("alpha", 1, "big", 1)]),
        ("duo", key(connections=[1, 3]), "openai", [("alpha", 1, "big", 1)]),
        ("mixed", key(), "openai", [("alpha", 1, "small", 1), ("alpha", 2, "small", 1)]),
        ("anth/claude", key(), "anthropic", [("anth", 5, "claude", 0)]),
        ("alpha/big", key(models=["alpha/*"]), "openai", [("alpha", 1, "big", 0)]),
    ],
)
def test_plan_route_targets(
    model: str, client: KeyInfo, wire: str, expected: list[tuple[str, int, str, int]]
) -> None:
    plan = plan_route(SNAPSHOT, model, client, wire)

    assert described(plan.targets) == expected
    assert plan.requested_model == model


@pytest.mark.parametrize(
    ("model", "strategy", "combo_name"),
    [("alpha/big", "single", None), ("duo", "priority", "duo")],
)
def test_plan_route_names_strategy_and_combo(
    model: str, strategy: str, combo_name: str | None
) -> None:
    plan = plan_route(SNAPSHOT, model, key())

    assert (plan.strategy, plan.combo) == (strategy, combo_name)


@pytest.mark.parametrize(
    ("model", "client", "status", "code"),
    [
        ("nope", key(), 404, "model_not_found"),
        ("zeta/big", key(), 404, "model_not_found"),
        ("alpha/", key(), 404, "model_not_found"),
        ("zeta/big", key(models=["beta/*"]), 404, "model_not_found"),  # 404 before 403
        ("alpha/big", key(models=["beta/*"]), 403, "model_not_allowed"),
        ("duo", key(models=["alpha/big"]), 403, "model_not_allowed"),
        ("alpha/big", key(connections=[3]), 503, "all_accounts_inactive"),
        ("anth/claude", key(), 404, "no_executable_targets"),  # wire format differs
        ("ghost", key(), 503, "all_accounts_inactive"),  # step on an unknown provider
    ],
)
def test_plan_route_refusals(model: str, client: KeyInfo, status: int, code: str) -> None:
    with pytest.raises(GatewayError) as caught:
        plan_route(SNAPSHOT, model, client)

    assert (caught.value.status, caught.value.code) == (status, code)


# --- keys -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "allowed", "expected"),
    [
        ("openai/gpt-4o", ["openai/gpt-4o"], True),
        ("openai/gpt-4o", ["openai/*"], True),
        ("openai/gpt-4o", ["*"], True),
        ("openai/gpt-4o", [], True),
        ("team-fast", ["team-fast"], True),
        ("openai/gpt-4o", ["openai/gpt-4o-mini"], False),
        ("openai/gpt-4o", ["anthropic/*"], False),
        ("openaiX/gpt-4o", ["openai/*"], False),
        ("team-fast", ["openai/*"], False),
    ],
)
def test_model_is_allowed(model: str, allowed: list[str], expected: bool) -> None:
    assert model_is_allowed(model, allowed) is expected


@pytest.mark.parametrize(
    ("is_active", "revoked_at", "expires_at", "expected"),
    [
        (True, None, None, True),
        (False, None, None, False),
        (True, NOW - SECOND, None, False),
        (True, None, NOW, False),  # expired at exactly now
        (True, None, NOW - SECOND, False),
        (True, None, NOW + SECOND, True),
    ],
)
def test_key_is_usable(
    is_active: bool, revoked_at: datetime | None, expires_at: datetime | None, expected: bool
) -> None:
    usable = key_is_usable(
        is_active=is_active, revoked_at=revoked_at, expires_at=expires_at, now=NOW
    )
    assert usable is expected


# --- auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([(b"authorization", b"Bearer sk-a")], "sk-a"),
        ([(b"authorization", b"bearer sk-a")], "sk-a"),
        ([(b"x-api-key", b"sk-b")], "sk-b"),
        ([(b"x-api-key", b"sk-b"), (b"authorization", b"Bearer sk-a")], "sk-a"),
        ([(b"authorization", b"Basic dXNlcjpwYXNz")], None),
        ([(b"authorization", b"Basic dXNlcjpwYXNz"), (b"x-api-key", b"sk-b")], "sk-b"),
        ([(b"authorization", b"Bearer   "), (b"x-api-key", b"  ")], None),
        ([(b"cookie", b"session=sk-a")], None),
        ([], None),
    ],
)
def test_presented_key(headers: list[tuple[bytes, bytes]], expected: str | None) -> None:
    assert presented_key(headers) == expected


AUTH_SNAPSHOT = snapshot_with(
    [
        ("sk-good", key()),
        ("sk-off", key(is_active=False)),
        ("sk-revoked", key(revoked_at=NOW - SECOND)),
        ("sk-expired", key(expires_at=NOW)),
    ]
)


def test_authenticate_returns_the_key() -> None:
    assert (
        authenticate(AUTH_SNAPSHOT, "sk-good", NOW)
        is AUTH_SNAPSHOT.keys_by_hash[hash_key("sk-good")]
    )


@pytest.mark.parametrize(
    ("presented", "code"),
    [
        (None, "missing_api_key"),
        ("", "missing_api_key"),
        ("sk-unknown", "invalid_api_key"),
        ("sk-off", "invalid_api_key"),
        ("sk-revoked", "invalid_api_key"),
        ("sk-expired", "invalid_api_key"),
    ],
)
def test_authenticate_refusals(presented: str | None, code: str) -> None:
    with pytest.raises(GatewayError) as caught:
        authenticate(AUTH_SNAPSHOT, presented, NOW)

    assert (caught.value.status, caught.value.code) == (401, code)
    assert caught.value.error_type == "authentication_error"


# --- failover and upstream errors ----------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (Outcome(OutcomeKind.NETWORK_ERROR), True),
        (Outcome(OutcomeKind.TIMEOUT), True),
        *[(Outcome(OutcomeKind.HTTP_ERROR, s), True) for s in (408, 429, 500, 502, 503, 504)],
        *[(Outcome(OutcomeKind.HTTP_ERROR, s), False) for s in (400, 401, 403, 404, 422)],
        (Outcome(OutcomeKind.SUCCESS, 200), False),
    ],
    ids=repr,
)
def test_should_fail_over(outcome: Outcome, expected: bool) -> None:
    assert should_fail_over(outcome) is expected


def test_upstream_error_body_passes_openai_errors_through() -> None:
    raw = b'{"error": {"message": "slow down", "type": "rate_limit", "code": "x"}, "extra": 1}'

    assert upstream_error_body(429, raw) == raw


@pytest.mark.parametrize(
    ("status", "raw", "message", "error_type"),
    [
        (502, b"  Bad Gateway\n", "Bad Gateway", "upstream_error"),
        (429, b"too many", "too many", "rate_limit_error"),
        (401, b"who are you", "who are you", "authentication_error"),
        (422, b'{"detail": "no"}', '{"detail": "no"}', "invalid_request_error"),
        (503, b"", "Upstream answered HTTP 503", "upstream_error"),
    ],
)
def test_upstream_error_body_wraps_other_bodies(
    status: int, raw: bytes, message: str, error_type: str
) -> None:
    body = orjson.loads(upstream_error_body(status, raw))

    assert body == {"error": {"message": message, "type": error_type, "code": f"upstream_{status}"}}


# --- payload --------------------------------------------------------------------------------

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", "invalid_json"),
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (b'"text"', "invalid_json"),
        (b'{"messages": [{"role": "user"}]}', "missing_model"),
        (b'{"model": "  ", "messages": [{"role": "user"}]}', "missing_model"),
        (b'{"model": 4, "messages": [{"role": "user"}]}', "missing_model"),
        (b'{"model": "a/b"}', "missing_messages"),
        (b'{"model": "a/b", "messages": []}', "missing_messages"),
        (b'{"model": "a/b", "messages": "hi"}', "missing_messages"),
        (b'{"model": "a/b", "messages": [{}], "stream": "yes"}', "invalid_stream"),
        (b'{"model": "a/b", "messages": [{}], "stream": 1}', "invalid_stream"),
    ],
)
def test_parse_chat_request_refusals(body: bytes, code: str) -> None:
    with pytest.raises(GatewayError) as caught:
        parse_chat_request(body)

    assert (caught.value.status, caught.value.code) == (400, code)


def test_parse_chat_request_returns_the_payload() -> None:
    body = orjson.dumps({"model": "a/b", "messages": MESSAGES, "stream": True, "n": 2})

    request = parse_chat_request(body)

    assert request.payload == {
        "model": "a/b",
        "messages": MESSAGES,
        "stream": True,
        "n": 2,
        "stream_options": {"include_usage": True},  # the gateway asks every stream for usage
    }
    assert (request.model, request.stream, request.tools) == ("a/b", True, 0)


def test_encode_for_target_replaces_only_the_model() -> None:
    payload: dict[str, Any] = {"model": "duo", "messages": MESSAGES, "stream": True, "top_p": 0.5}
    target = Target(provider("alpha"), conn(1, "alpha"), "big")

    encoded = orjson.loads(encode_for_target(payload, target))

    assert encoded == {"model": "big", "messages": MESSAGES, "stream": True, "top_p": 0.5}
    assert payload["model"] == "duo"


# --- catalog --------------------------------------------------------------------------------

CATALOG = ConfigSnapshot(
    providers={"alpha": provider("alpha"), "beta": provider("beta")},
    connections={
        "alpha": (conn(1, "alpha", "big", "small"), conn(2, "alpha", "small", "tiny")),
        "beta": (conn(3, "beta"), conn(4, "beta", "zeta")),
    },
    combos={"duo": combo("duo", ComboStep("alpha", "big"))},
)


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        (key(), ["alpha/big", "alpha/small", "alpha/tiny", "beta/zeta", "duo"]),
        (key(connections=[1]), ["alpha/big", "alpha/small", "duo"]),
        (key(models=["alpha/*"]), ["alpha/big", "alpha/small", "alpha/tiny"]),
        (key(models=["duo", "beta/zeta"]), ["beta/zeta", "duo"]),
    ],
)
def test_model_ids(client: KeyInfo, expected: list[str]) -> None:
    assert model_ids(CATALOG, client) == expected


def test_model_list_is_an_openai_model_list() -> None:
    body = orjson.loads(model_list(CATALOG, key(models=["duo", "beta/*"]), created=1700))

    assert body == {
        "object": "list",
        "data": [
            {"id": "beta/zeta", "object": "model", "created": 1700, "owned_by": "beta"},
            {"id": "duo", "object": "model", "created": 1700, "owned_by": "omniroute"},
        ],
    }


def test_the_egress_identity_of_a_proxy_has_no_credentials() -> None:
    proxied = replace(conn(1, "acme"), proxy_url="http://alice:secret@proxy.example:8080")
    assert proxied.egress == "http://proxy.example:8080"
    assert conn(2, "acme").egress == "direct"


def test_a_snapshot_resolves_a_model_once_and_a_new_snapshot_afresh() -> None:
    first = plan_route(SNAPSHOT, "alpha/small", key())
    without_1 = replace(
        SNAPSHOT, connections={**SNAPSHOT.connections, "alpha": (conn(2, "alpha", "small"),)}
    )

    assert plan_route(SNAPSHOT, "alpha/small", key()) is first
    assert described(plan_route(without_1, "alpha/small", key()).targets) == [
        ("alpha", 2, "small", 0)
    ]
    assert described(plan_route(SNAPSHOT, "alpha/small", key()).targets) == [
        ("alpha", 1, "small", 0),
        ("alpha", 2, "small", 0),
    ]


def test_a_key_with_other_permissions_gets_a_plan_of_its_own() -> None:
    everyone = plan_route(SNAPSHOT, "beta/big", key())
    restricted = plan_route(SNAPSHOT, "beta/big", key(connections=[4]))

    assert described(everyone.targets) == [("beta", 3, "big", 0), ("beta", 4, "big", 0)]
    assert described(restricted.targets) == [("beta", 4, "big", 0)]


def test_a_refused_model_is_refused_again_and_not_kept() -> None:
    for _ in range(2):
        with pytest.raises(GatewayError):
            plan_route(SNAPSHOT, "alpha/big", key(models=["beta/*"]))

    assert ("alpha/big", "openai", key(models=["beta/*"])) not in planning._plans.of(SNAPSHOT)


def test_the_plans_kept_for_one_snapshot_are_bounded() -> None:
    models = [f"alpha/model-{index}" for index in range(planning.PLANS_KEPT + 5)]

    plans = [plan_route(SNAPSHOT, model, key()) for model in models]

    assert len(planning._plans) <= planning.PLANS_KEPT
    assert [p.targets[0].model for p in plans] == [m.removeprefix("alpha/") for m in models]
