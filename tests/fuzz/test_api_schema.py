"""The management and lease APIs fuzzed from the gateway's OpenAPI schema (``/api/schema/``).

Schemathesis draws requests for every operation the schema lists, in-process through Django's
WSGI handler, authenticated with a key holding the ``manage`` and ``lease:exclusive`` scopes.
Checks: never a 5xx, and the answers conform to the schema (status codes, content types,
bodies, headers). The test database is a transactional one, flushed afterwards; the state store
is a fresh in-process one, so nothing is left for other tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import override_settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
)

from omniroute.core import state as resilience_state
from omniroute.core.store import MemoryStore
from routing.domain.config.vocabulary import Scope
from routing.models import ClientApiKey, ProviderConnection
from routing.services import api_key_create
from routing.snapshot import snapshot_clear
from tests.fuzz.conftest import API_EXAMPLES, CASES, PROFILE
from tests.routing.harness import add_connection, add_provider

pytestmark = [pytest.mark.fuzz, pytest.mark.django_db(transaction=True)]


class Operator:
    """The fuzzer's credentials: a key the fuzzed requests may revoke or delete, made again
    when they do (each replacement is counted)."""

    def __init__(self, connection: ProviderConnection) -> None:
        self.connection = connection
        self.replaced = 0
        self.key_id, self.plaintext = self._create()

    def _create(self) -> tuple[int, str]:
        key, plaintext = api_key_create(
            name="fuzz operator",
            scopes=[Scope.MANAGE, Scope.LEASE_EXCLUSIVE],
            allowed_connections=[self.connection],
        )
        return key.pk, plaintext

    def headers(self) -> dict[str, str]:
        key = ClientApiKey.objects.filter(pk=self.key_id, is_active=True).first()
        if key is None or key.revoked_at is not None:
            self.key_id, self.plaintext = self._create()
            self.replaced += 1
        return {"Authorization": f"Bearer {self.plaintext}"}


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch) -> Iterator[Operator]:
    """Seed rows for the fuzzer to find (a provider, a connection) and its key; a fresh
    in-process state store, and no snapshot left from another test."""
    store = MemoryStore()
    resilience_state.get_store.cache_clear()
    monkeypatch.setattr(resilience_state, "build_store", lambda *args, **kwargs: store)
    snapshot_clear()
    acme = add_provider("acme")
    connection = ProviderConnection.objects.get(pk=add_connection(acme, "fuzz", "sk-fuzz-0001"))
    yield Operator(connection)
    snapshot_clear()
    resilience_state.get_store.cache_clear()


class ErrorLog(logging.Handler):
    """Every record logged at ERROR or above while it is attached (a swallowed exception)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name != "django.request":  # it logs each 5xx answer: the checks see those
            self.records.append(record)


@pytest.fixture
def error_log() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


# The short run draws a fixed sequence of random requests per operation; the long one adds
# schemathesis's coverage phase (every boundary and every kind of invalid value the schema
# implies, some 50 to 200 requests per operation) and fresh seeds.
CONFIG = SchemathesisConfig.from_dict(
    {
        "phases": {"coverage": {"enabled": PROFILE == "long"}},
        "generation": {"deterministic": PROFILE != "long"},
    }
)
# Loaded at collection, from the app itself: one test per operation the schema lists (the
# schema is private with debug off; the fuzzer reads it as an opted-out deployment would), but
# the /v1 client APIs, which Django does not serve (test_client_api_schema drives them on a
# running gateway).
with override_settings(PUBLIC_API_DOCS=True):
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/", get_wsgi_application(), config=CONFIG
    ).exclude(path_regex="^/v1/")

# Checks left out, with the drift that makes them fail on harmless answers:
# - positive_data_acceptance: requests the schema calls valid are refused with a 400 where the
#   schema cannot state the rule: cross-field limits (comboCooldownWait.maxWaitMs <= budgetMs),
#   JSON fields documented as any value that refuse null (a combo's options, a connection's
#   extras), and the DELETE body of /api/resilience/model-cooldowns, which drf-spectacular
#   leaves out of the schema.
# - negative_data_rejection: DRF parses more leniently than the schema states (a boolean from
#   "true" or 1, a date-time in more forms than RFC 3339), so some "invalid" requests succeed.
EXCLUDED = [positive_data_acceptance, negative_data_rejection]
# The lease API's check order (model, then scope, then owner header) answers a request
# without its owner header with 503 or 403 when an earlier check fails, not with a 400. It
# answers a model that does not resolve with 503 LEASE_SERVICE_UNAVAILABLE, and so does a crash:
# a crash there is told by its log instead.
LEASE = "POST /api/v1/session-leases"
LEASE_EXCLUDED = [*EXCLUDED, not_a_server_error, missing_required_header]


@schema.parametrize()
# One operator per operation, shared by its cases on purpose: the rows the fuzzer writes stay
# until the flush after the operation, as they would on a live gateway.
@settings(
    max_examples=API_EXAMPLES[PROFILE],
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_api(case: Any, operator: Operator, error_log: ErrorLog) -> None:
    label = case.operation.label
    CASES[f"api {label}"] += 1
    excluded = LEASE_EXCLUDED if label == LEASE else EXCLUDED
    response = case.call_and_validate(headers=operator.headers(), excluded_checks=excluded)

    if response.status_code >= 500:  # only the lease API's documented 503 gets here
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "LEASE_SERVICE_UNAVAILABLE"
    assert not error_log.records, [record.getMessage() for record in error_log.records]
