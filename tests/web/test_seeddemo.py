"""``manage.py seeddemo``: a demo client key without the ``manage`` scope, the same on every run
while it is valid, kept in the data directory readable by its owner only."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from routing.domain.config.keys import hash_key
from routing.models import ClientApiKey
from routing.services import api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir(settings: Settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    return tmp_path


def seed() -> str:
    out = io.StringIO()
    call_command("seeddemo", stdout=out)
    return out.getvalue()


def stored_key(data_dir: Path) -> str:
    return (data_dir / "demo-key").read_text().strip()


def test_the_demo_key_is_a_client_key_without_manage_scope(data_dir: Path) -> None:
    output = seed()
    plaintext = stored_key(data_dir)
    assert plaintext in output
    key = ClientApiKey.objects.get(key_hash=hash_key(plaintext))
    assert key.scopes == []
    assert key.is_usable(timezone.now())
    assert "'manage' scope" not in output
    assert "createapikey --name operator --scope manage" in output
    assert "createsuperuser" in output
    response = Client().get("/api/providers/", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 403


def test_the_key_file_is_readable_by_its_owner_only(data_dir: Path) -> None:
    seed()
    assert stat.S_IMODE((data_dir / "demo-key").stat().st_mode) == 0o600


def test_a_second_run_prints_the_same_key_and_makes_none(data_dir: Path) -> None:
    first = seed()
    plaintext = stored_key(data_dir)
    keys = ClientApiKey.objects.count()
    second = seed()
    assert plaintext in first and plaintext in second
    assert "the same as last run" in second
    assert ClientApiKey.objects.count() == keys
    assert ClientApiKey.objects.get(key_hash=hash_key(plaintext)).is_usable(timezone.now())


def test_a_key_that_no_longer_works_is_replaced_and_nothing_is_revoked(data_dir: Path) -> None:
    seed()
    old = ClientApiKey.objects.get(key_hash=hash_key(stored_key(data_dir)))
    old.is_active = False  # an operator switched it off in the admin
    old.save()
    earlier, _ = api_key_create(name="demo")  # a demo key from an older version of the gateway
    seed()
    new = ClientApiKey.objects.get(key_hash=hash_key(stored_key(data_dir)))
    assert new.pk not in (old.pk, earlier.pk)
    assert new.is_usable(timezone.now())
    assert ClientApiKey.objects.filter(pk__in=[old.pk, earlier.pk]).count() == 2
    earlier.refresh_from_db()
    assert earlier.revoked_at is None and earlier.is_active


def test_a_deleted_key_is_replaced(data_dir: Path) -> None:
    seed()
    ClientApiKey.objects.filter(key_hash=hash_key(stored_key(data_dir))).delete()
    seed()
    assert ClientApiKey.objects.filter(key_hash=hash_key(stored_key(data_dir))).exists()
    assert stat.S_IMODE((data_dir / "demo-key").stat().st_mode) == 0o600
