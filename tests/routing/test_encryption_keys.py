"""Provider secrets under OMNIROUTE_ENCRYPTION_KEY: rotation, the legacy key, rotatekeys.

Issue 14: the key is apart from Django's secret key, old keys still decrypt, and
``manage.py rotatekeys`` re-encrypts every stored secret with the newest one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.test import override_settings

from routing.crypto import decrypt_secret, encrypt_secret, legacy_key
from routing.domain.config.encryption_keys import DEV_ENCRYPTION_KEY, parse_encryption_keys
from routing.models import Provider, ProviderConnection
from routing.services import connection_save, secrets_rotate

pytestmark = pytest.mark.django_db

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
SECRET = "sk-rotate-SECRET-0123456789"
REFRESH = "rt-rotate-REFRESH-0123456789"
MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


def _save(provider: Provider, name: str, **secrets: str) -> ProviderConnection:
    return connection_save(
        connection=ProviderConnection(), fields={"provider": provider, "name": name}, **secrets
    )


def _stored(connection: ProviderConnection) -> ProviderConnection:
    return ProviderConnection.objects.get(pk=connection.pk)


def _rotatekeys() -> str:
    out, err = StringIO(), StringIO()
    call_command("rotatekeys", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_parse_encryption_keys_reads_a_newest_first_list() -> None:
    assert parse_encryption_keys("") == ()
    assert parse_encryption_keys(f" {KEY_B} , {KEY_A} ,") == (KEY_B, KEY_A)


@pytest.mark.parametrize(
    "bad",
    ["passphrase", KEY_A[:-4], KEY_A + "AAAA", "é" * 44, KEY_A.replace("=", "A"), "*" * 44],
    ids=["passphrase", "short", "long", "non-ascii", "unpadded", "not-base64"],
)
def test_a_malformed_key_is_refused_without_echoing_it(bad: str) -> None:
    with pytest.raises(ValueError, match="key 2 is not a Fernet key") as refused:
        parse_encryption_keys(f"{KEY_A},{bad}")
    assert bad not in str(refused.value) and bad[:8] not in str(refused.value)


def test_a_repeated_key_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_encryption_keys(f"{KEY_A},{KEY_A}")


def test_a_secret_written_under_a_still_decrypts_under_b_then_a(provider: Provider) -> None:
    with override_settings(ENCRYPTION_KEYS=(KEY_A,)):
        connection = _save(provider, "rotated", secret=SECRET)
    with override_settings(ENCRYPTION_KEYS=(KEY_B, KEY_A)):
        assert _stored(connection).get_secret() == SECRET
        assert Fernet(KEY_B).decrypt(encrypt_secret("new").encode()) == b"new"  # newest first
    with override_settings(ENCRYPTION_KEYS=(KEY_B,)):
        assert _stored(connection).get_secret() is None


def test_rotatekeys_moves_every_secret_to_the_newest_key(provider: Provider) -> None:
    with override_settings(ENCRYPTION_KEYS=(KEY_A,)):
        first = _save(provider, "first", secret=SECRET, refresh_secret=REFRESH)
        second = _save(provider, "second", secret=SECRET + "2")
    with override_settings(ENCRYPTION_KEYS=(KEY_B, KEY_A)):
        output = _rotatekeys()
        again = secrets_rotate()

    assert "Re-encrypted 3 secret(s) with the newest key; 0 already used it" in output
    assert (again.rotated, again.current, again.unreadable) == (0, 3, 0)  # idempotent
    with override_settings(ENCRYPTION_KEYS=(KEY_B,)):
        stored = _stored(first)
        assert stored.get_secret() == SECRET
        assert decrypt_secret(stored.refresh_secret_encrypted) == REFRESH
        assert _stored(second).get_secret() == SECRET + "2"


def test_rotatekeys_prints_no_secret_and_no_ciphertext(provider: Provider) -> None:
    with override_settings(ENCRYPTION_KEYS=(KEY_A,)):
        connection = _save(provider, "quiet", secret=SECRET, refresh_secret=REFRESH)
    before = _stored(connection)
    with override_settings(ENCRYPTION_KEYS=(KEY_B, KEY_A)):
        output = _rotatekeys()
    after = _stored(connection)

    assert after.secret_encrypted != before.secret_encrypted
    for text in (SECRET, REFRESH, KEY_A, KEY_B, before.secret_encrypted, after.secret_encrypted):
        assert text not in output
    assert "Re-encrypted 2 secret(s)" in output


def test_a_secret_written_before_the_upgrade_still_decrypts_and_rotates(
    provider: Provider,
) -> None:
    """Before OMNIROUTE_ENCRYPTION_KEY the key was HKDF(OMNIROUTE_SECRET_KEY)."""
    connection = _save(provider, "legacy")
    with override_settings(SECRET_KEY="the-old-django-secret-key"):
        old_form = Fernet(legacy_key("the-old-django-secret-key")).encrypt(SECRET.encode())
        ProviderConnection.objects.filter(pk=connection.pk).update(
            secret_encrypted=old_form.decode()
        )
        with override_settings(ENCRYPTION_KEYS=(KEY_A,)):
            assert _stored(connection).get_secret() == SECRET
            result = secrets_rotate()
    assert (result.rotated, result.unreadable) == (1, 0)
    with override_settings(ENCRYPTION_KEYS=(KEY_A,), SECRET_KEY="a-new-django-secret-key"):
        assert _stored(connection).get_secret() == SECRET  # the Django key no longer matters


def test_rotatekeys_reports_unreadable_secrets_and_keeps_the_rest(provider: Provider) -> None:
    with override_settings(ENCRYPTION_KEYS=(KEY_A,)):
        lost = _save(provider, "lost", secret=SECRET)
    with override_settings(ENCRYPTION_KEYS=(KEY_B,)):
        kept = _save(provider, "kept", secret=SECRET + "2")
    lost_form = _stored(lost).secret_encrypted
    with override_settings(ENCRYPTION_KEYS=(Fernet.generate_key().decode(), KEY_B)):
        with pytest.raises(CommandError) as failed:
            _rotatekeys()
        assert _stored(kept).get_secret() == SECRET + "2"  # rotated and committed

    message = str(failed.value)
    assert f"connections {lost.pk}" in message
    assert SECRET not in message and lost_form not in message
    assert _stored(lost).secret_encrypted == lost_form  # left as it was


def _check(**variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMNIROUTE_ENCRYPTION_KEY"}
    env.update(
        DJANGO_SETTINGS_MODULE="omniroute.settings",  # the production settings, not the suite's
        OMNIROUTE_DEBUG="0",
        OMNIROUTE_SECRET_KEY="a-real-secret-" + KEY_A,
        **variables,
    )
    argv = [sys.executable, str(MANAGE), "check"]
    return subprocess.run(argv, env=env, capture_output=True, text=True)


def test_debug_off_without_an_encryption_key_refuses_to_start() -> None:
    missing = _check()
    dev = _check(OMNIROUTE_ENCRYPTION_KEY=DEV_ENCRYPTION_KEY)
    malformed = _check(OMNIROUTE_ENCRYPTION_KEY=f"{KEY_A},not-a-key-{SECRET}")
    configured = _check(OMNIROUTE_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}")

    assert missing.returncode != 0 and dev.returncode != 0
    assert "OMNIROUTE_ENCRYPTION_KEY is unset or holds the development key" in missing.stderr
    assert "OMNIROUTE_ENCRYPTION_KEY is unset or holds the development key" in dev.stderr
    assert malformed.returncode != 0
    assert "OMNIROUTE_ENCRYPTION_KEY: key 2 is not a Fernet key" in malformed.stderr
    assert SECRET not in malformed.stderr
    assert configured.returncode == 0, configured.stderr
