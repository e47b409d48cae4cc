"""Resilience fixtures, each asked for by name (no autouse data)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from routing.domain.vocabulary import Scope
from routing.services import api_key_create

# Environment variables that move the settings defaults; tests of defaults clear them.
SETTINGS_ENV = (
    "PROVIDER_COOLDOWN_ENABLED",
    "PROVIDER_COOLDOWN_MIN_MS",
    "PROVIDER_COOLDOWN_MAX_MS",
    "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD",
    "OMNIROUTE_PROVIDER_BREAKER_API_KEY_DEGRADATION_THRESHOLD",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No environment override of the settings defaults this package asserts on."""
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def api_client() -> APIClient:
    """An unauthenticated DRF client."""
    return APIClient()


def _key_client(**key: Any) -> APIClient:
    _, plaintext = api_key_create(**key)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


@pytest.fixture
def manage_client(db: None) -> APIClient:
    """A DRF client holding a key with the ``manage`` scope."""
    return _key_client(name="operator", scopes=[Scope.MANAGE])


@pytest.fixture
def plain_client(db: None) -> APIClient:
    """A DRF client holding a key without any scope."""
    return _key_client(name="client")


@pytest.fixture
def staff_client(django_user_model: Any) -> Client:
    """A Django client logged in as a superuser."""
    user = django_user_model.objects.create_superuser("root", "root@example.com", password=None)
    client = Client()
    client.force_login(user)
    return client
