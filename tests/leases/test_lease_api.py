"""``POST /api/v1/session-leases`` over HTTP: the generations, the
fence, capacity with ``Retry-After`` on the edge's clock, and every branch of the check order."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

import leases.api as lease_api
from leases.models import ExclusiveConnectionLease
from leases.selectors import lease_active
from leases.services import lease_acquire
from omniroute.core.store import MemoryStore
from routing.models import ClientApiKey, Provider, ProviderConnection
from routing.services import api_key_create, api_key_revoke
from routing.snapshot import snapshot_clear
from tests.routing.harness import add_connection, add_provider
from tests.routing.lease_support import OTHER_OWNER, OWNER, hashed, managed_key, owner_of

pytestmark = pytest.mark.django_db(transaction=True)  # key writes reach the snapshot on commit

URL = "/api/v1/session-leases"
MODEL = "acme/m1"
T0 = timezone.now().replace(microsecond=0)


class Clock:
    """The lease API's clock (``leases.api.clock``); moves only when told."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(lease_api, "clock", moved)
    return moved


@pytest.fixture
def acme(fresh_snapshot: None, fresh_process_store: MemoryStore, clock: Clock) -> Provider:
    return add_provider("acme")


@pytest.fixture
def solo(acme: Provider) -> int:
    """The one connection of a one-connection managed pool."""
    return add_connection(acme, "Work account", "sk-acme-SOLO-0001", priority=10)


@pytest.fixture
def key(solo: int) -> str:
    """A managed key on ``solo``."""
    return managed_key([solo])[1]


def post(
    key: str | None,
    body: Any,
    *,
    owner: str | None = OWNER,
    content_type: str = "application/json",
) -> Any:
    headers: dict[str, str] = {}
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    if owner is not None:
        headers["HTTP_X_OMNIROUTE_LEASE_OWNER"] = owner
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return APIClient().generic("POST", URL, data, content_type, **headers)  # type: ignore[arg-type]


def acquire(key: str, owner: str = OWNER, model: str = MODEL) -> Any:
    return post(key, {"action": "acquire", "model": model}, owner=owner)


def act(key: str, action: str, generation: int, owner: str | None = OWNER, **extra: Any) -> Any:
    return post(key, {"action": action, "generation": generation, **extra}, owner=owner)


def error(response: Any) -> tuple[int, str]:
    body = response.json()
    assert body["error"]["type"] in ("lease_error", "permission_error")
    return response.status_code, body["error"]["code"]


# --- the lifecycle --------------------------------------------------------------------------


def test_first_acquire_is_generation_1_and_shows_no_binding(key: str) -> None:
    response = acquire(key)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"state", "generation", "acquiredAt", "renewedAt", "expiresAt"}
    assert (body["state"], body["generation"]) == ("ACTIVE", 1)
    assert body["expiresAt"] == (T0 + timedelta(seconds=120)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert response["Access-Control-Allow-Origin"] == "*"


def test_the_same_owner_and_key_again_reuse_the_generation(key: str, clock: Clock) -> None:
    first = acquire(key).json()
    clock.advance(30)
    again = acquire(key).json()
    assert again["generation"] == first["generation"] == 1
    assert again["expiresAt"] > first["expiresAt"]


def test_release_then_acquire_is_the_next_generation(key: str) -> None:
    assert acquire(key).json()["generation"] == 1
    released = act(key, "release", 1)
    assert (released.status_code, released.json()["state"]) == (200, "RELEASED")
    assert act(key, "release", 1).status_code == 200  # idempotent
    assert acquire(key).json()["generation"] == 2


def test_a_stale_generation_is_409_lease_fence_stale(key: str) -> None:
    acquire(key)
    act(key, "release", 1, reason="CLIENT_CANCELLED")
    acquire(key)
    for action in ("status", "renew"):
        assert error(act(key, action, 1)) == (409, "LEASE_FENCE_STALE")
    for action in ("status", "renew", "release"):
        assert error(act(key, action, 3)) == (409, "LEASE_FENCE_STALE")
    assert act(key, "release", 1).json()["state"] == "RELEASED"  # that one, again: idempotent
    assert act(key, "status", 2).status_code == 200


def test_a_second_owner_on_a_one_connection_pool_waits_for_the_first_lease(
    key: str, clock: Clock
) -> None:
    acquire(key)
    clock.advance(45.5)

    response = acquire(key, owner=OTHER_OWNER)

    assert response.status_code == 429
    assert response["Retry-After"] == "75"  # the first lease's 120 s, less the 45.5 s gone
    assert response.json() == {
        "state": "WAITING_FOR_CAPACITY",
        "reason": "NO_FREE_ELIGIBLE_CONNECTION",
        "error": {
            "type": "lease_error",
            "code": "LEASE_CAPACITY_UNAVAILABLE",
            "message": "Exclusive managed session capacity is temporarily unavailable",
        },
        "retryAfter": 75,
        "eligibleCount": 1,
        "freeCount": 0,
    }


def test_status_shows_the_binding_by_name_to_its_owner_and_key_only(key: str, solo: int) -> None:
    acquire(key)
    status = act(key, "status", 1)
    assert status.status_code == 200
    assert status.json()["connection"] == {"displayName": "Work account", "provider": "Acme"}
    other_key = managed_key([solo], name="other")[1]
    for response in (act(other_key, "status", 1), act(key, "status", 1, owner=OTHER_OWNER)):
        assert error(response) == (409, "LEASE_FENCE_STALE")
        assert "connection" not in response.json()


def test_renew_extends_from_now_and_keeps_the_generation(key: str, clock: Clock) -> None:
    acquire(key)
    clock.advance(100)
    renewed = act(key, "renew", 1)
    assert renewed.status_code == 200
    expected = clock.now + timedelta(seconds=120)
    assert (renewed.json()["generation"], renewed.json()["expiresAt"]) == (
        1,
        expected.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
    )


def test_an_expired_lease_is_gone_and_the_connection_free_again(key: str, clock: Clock) -> None:
    acquire(key)
    clock.advance(121)
    assert error(act(key, "renew", 1)) == (409, "LEASE_FENCE_STALE")
    assert acquire(key, owner=OTHER_OWNER).json()["generation"] == 1


def test_the_same_owner_through_another_key_is_409_and_keeps_its_binding(
    key: str, solo: int
) -> None:
    acquire(key)
    other_key = managed_key([solo], name="other")[1]
    assert error(acquire(other_key)) == (409, "LEASE_FENCE_STALE")
    assert act(key, "status", 1).status_code == 200


# --- acquire's selection ----------------------------------------------------------------------


def test_acquire_skips_cooling_terminal_and_held_connections(acme: Provider, clock: Clock) -> None:
    cooling = add_connection(acme, "cooling", "sk-acme-C-1", priority=1)
    banned = add_connection(acme, "banned", "sk-acme-B-2", priority=2, test_status="banned")
    held = add_connection(acme, "held", "sk-acme-H-3", priority=3)
    free = add_connection(acme, "free", "sk-acme-F-4", priority=4)
    ProviderConnection.objects.filter(pk=cooling).update(
        rate_limited_until=timezone.now() + timedelta(seconds=60)
    )
    key = managed_key([cooling, banned, held, free])[1]
    lease_acquire(
        owner_hash=hashed(OTHER_OWNER),
        api_key_id=999,
        provider="acme",
        connection_id=held,
        now=clock.now,
    )

    assert acquire(key).status_code == 200

    lease = lease_active(owner_hash=hashed(OWNER), now=clock.now)
    assert lease is not None and lease.connection_id == free


def test_every_eligible_connection_cooling_is_429_lease_eligibility_unavailable(
    acme: Provider,
) -> None:
    cooling = add_connection(acme, "cooling", "sk-acme-C-1")
    ProviderConnection.objects.filter(pk=cooling).update(
        rate_limited_until=timezone.now() + timedelta(seconds=60)
    )
    key = managed_key([cooling])[1]
    response = acquire(key)
    assert error(response) == (429, "LEASE_ELIGIBILITY_UNAVAILABLE")
    assert 1 <= int(response["Retry-After"]) <= 60


def test_a_model_none_of_the_keys_connections_serves_is_409(acme: Provider, solo: int) -> None:
    other = add_connection(add_provider("other"), "o", "sk-other-1")
    key = managed_key([solo])[1]
    assert other and error(acquire(key, model="other/m1")) == (409, "LEASE_NO_ELIGIBLE_CONNECTION")


# --- the check order, each branch ----------------------------------------------------------------


def test_1_no_key_or_an_unusable_key_is_401(key: str) -> None:
    assert error(post(None, {"action": "acquire", "model": MODEL})) == (
        401,
        "LEASE_AUTHENTICATION_REQUIRED",
    )
    assert error(post("sk-omr-unknown", b"garbage", content_type="text/plain")) == (
        401,
        "LEASE_API_KEY_INVALID",
    )
    managed = ClientApiKey.objects.get(name="managed")
    api_key_revoke(key=managed, now=timezone.now())
    assert error(acquire(key)) == (401, "LEASE_API_KEY_INVALID")


def test_2_a_body_that_is_not_json_is_415_before_it_is_read(key: str) -> None:
    response = post(key, b"not even json", content_type="text/plain")
    assert error(response) == (415, "LEASE_CONTENT_TYPE_REQUIRED")
    charset = post(
        key, {"action": "acquire", "model": MODEL}, content_type="application/json; charset=utf-8"
    )
    assert charset.status_code == 200


def test_3_an_invalid_action_is_400_before_the_owner_is_read(key: str) -> None:
    response = post(key, {"action": "renew", "generation": "1"}, owner=None)
    assert error(response) == (400, "LEASE_ACTION_INVALID")


def test_4_a_model_that_does_not_resolve_is_503_before_the_scope_is_read(solo: int) -> None:
    _, plain = api_key_create(name="plain")
    assert error(acquire(plain, model="nowhere/m1")) == (503, "LEASE_SERVICE_UNAVAILABLE")


def test_5_the_keys_model_policy_answers_before_the_scope_is_read(solo: int) -> None:
    _, plain = api_key_create(name="plain", allowed_models=["other/*"])
    assert error(acquire(plain)) == (403, "model_not_allowed")


def test_6_a_key_without_the_scope_or_its_connections_is_403(key: str, solo: int) -> None:
    _, plain = api_key_create(name="plain")
    assert error(act(plain, "status", 1, owner=None)) == (403, "LEASE_SCOPE_REQUIRED")
    ClientApiKey.objects.get(name="managed").allowed_connections.clear()  # past the service
    snapshot_clear()
    assert error(act(key, "status", 1, owner=None)) == (403, "LEASE_KEY_CONFIGURATION_INVALID")


@pytest.mark.parametrize(
    ("owner", "code"),
    [
        (None, "LEASE_CONTEXT_REQUIRED"),
        ("   ", "LEASE_CONTEXT_REQUIRED"),
        ("vlo_short", "LEASE_CONTEXT_INVALID"),
        ("session-1234", "LEASE_CONTEXT_INVALID"),
    ],
)
def test_7_the_owner_header_is_required_and_well_formed(
    key: str, owner: str | None, code: str
) -> None:
    assert error(post(key, {"action": "acquire", "model": MODEL}, owner=owner)) == (400, code)


def test_11_anything_unexpected_is_503_never_500(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(lease_api, "lease_lifecycle_status", broken)
    response = act(key, "status", 1)
    assert error(response) == (503, "LEASE_SERVICE_UNAVAILABLE")
    assert b"database" not in response.content


def test_the_cors_preflight_is_204_and_allows_the_lease_headers() -> None:
    response = APIClient().options(URL)
    assert response.status_code == 204
    allowed = response["Access-Control-Allow-Headers"].lower()
    assert "x-omniroute-lease-owner" in allowed and "x-omniroute-lease-generation" in allowed


def test_the_owner_token_is_never_stored(key: str) -> None:
    owner = owner_of("stored")
    acquire(key, owner=owner)
    rows = list(ExclusiveConnectionLease.objects.values_list())
    assert rows and owner not in repr(rows) and hashed(owner) in repr(rows)


def test_an_accept_header_it_cannot_meet_still_gets_the_lease_answer(acme: Provider) -> None:
    response = APIClient().generic("POST", URL, b"{}", "application/json", HTTP_ACCEPT="text/html")  # type: ignore[arg-type]

    assert error(response) == (401, "LEASE_AUTHENTICATION_REQUIRED")
