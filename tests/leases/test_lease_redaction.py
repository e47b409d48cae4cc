"""The lease owner token goes nowhere: after a
whole lifecycle through the API and managed inference that succeeds, fails upstream, and is
refused, the raw token is in no table, no log record (at DEBUG) and no upstream request, and
neither lease header reaches the upstream."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.apps import apps
from django.db import connection
from rest_framework.test import APIClient

import leases.api as lease_api
from tests.routing.harness import (
    BACKUP,
    OK,
    PRIMARY,
    UNAVAILABLE,
    Gateway,
    chat,
    communicator,
    read_reply,
    send_body,
)
from tests.routing.lease_support import hashed, lease_headers, managed_key, owner_of

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = owner_of("redaction")
LEASE_HEADERS = (b"x-omniroute-lease-owner", b"x-omniroute-lease-generation")


def lifecycle(key: str, body: dict[str, Any]) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_X_OMNIROUTE_LEASE_OWNER=OWNER)
    return client.post("/api/v1/session-leases", body, format="json")


async def infer(gateway: Gateway, key: str, generation: int) -> int:
    comm = communicator(gateway.app, key, extra_headers=lease_headers(OWNER, generation))
    await send_body(comm, chat())
    return (await read_reply(comm)).status


def every_stored_value() -> str:
    """Every row of every table, as text."""
    tables = set(connection.introspection.table_names())
    models = [m for m in apps.get_models() if m._meta.db_table in tables]
    return repr([list(model._default_manager.values_list()) for model in models])


async def test_the_owner_token_reaches_no_table_log_or_upstream(
    gateway: Gateway,
    both: tuple[int, int],
    process_store: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, BACKUP: OK})
    _, key = await sync_to_async(managed_key)(both)
    acquired = await sync_to_async(lifecycle)(key, {"action": "acquire", "model": "acme/m1"})
    generation = acquired.json()["generation"]

    statuses = [await infer(gateway, key, generation) for generation in (generation, 99)]
    for action in ("status", "renew", "release"):
        await sync_to_async(lifecycle)(key, {"action": action, "generation": generation})
    statuses.append(await infer(gateway, key, generation))
    monkeypatch.setattr(lease_api, "lease_lifecycle_status", _broken)
    broken = await sync_to_async(lifecycle)(key, {"action": "status", "generation": 1})

    assert (acquired.status_code, statuses, broken.status_code) == (200, [200, 409, 409], 503)
    assert len(gateway.fake.requests) >= 2  # the bound connection failed over to the other one
    stored = await sync_to_async(every_stored_value)()
    assert OWNER not in stored and hashed(OWNER) in stored
    logged = caplog.text + "".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "the database went away" in logged  # the unexpected failure was logged, token-free
    assert OWNER not in logged
    for request in gateway.fake.requests:
        sent = repr(request.headers.raw) + request.content.decode()
        assert OWNER not in sent
        assert not any(name in LEASE_HEADERS for name, _ in request.headers.raw)
        assert orjson.loads(request.content)["model"] == "m1"


def _broken(**kwargs: Any) -> Any:
    raise RuntimeError("the database went away")
