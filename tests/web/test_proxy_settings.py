"""The settings for a gateway behind a TLS-terminating proxy, read from the environment: both
off by default, a malformed trusted origin stops the start with its name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import json, omniroute.settings as s; print(json.dumps([s.CSRF_TRUSTED_ORIGINS, "
    "getattr(s, 'SECURE_PROXY_SSL_HEADER', None)]))"
)


def load_settings(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNIROUTE_", "DJANGO_"))}
    env.update(
        OMNIROUTE_DATA_DIR=str(tmp_path),
        OMNIROUTE_SECRET_KEY="a-real-secret-" + "x" * 40,
        OMNIROUTE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        **variables,
    )
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_both_are_off_by_default(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == [[], None]


def test_both_on(tmp_path: Path) -> None:
    loaded = load_settings(
        tmp_path,
        OMNIROUTE_CSRF_TRUSTED_ORIGINS="https://gateway.example,https://*.example.org",
        OMNIROUTE_SECURE_PROXY_SSL_HEADER="true",
    )
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == [
        ["https://gateway.example", "https://*.example.org"],
        ["HTTP_X_FORWARDED_PROTO", "https"],
    ]
    off = load_settings(tmp_path, OMNIROUTE_SECURE_PROXY_SSL_HEADER="off")
    assert json.loads(off.stdout)[1] is None


def test_a_malformed_trusted_origin_stops_the_start(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path, OMNIROUTE_CSRF_TRUSTED_ORIGINS="gateway.example")
    assert loaded.returncode != 0
    assert "ImproperlyConfigured: OMNIROUTE_CSRF_TRUSTED_ORIGINS: 'gateway.example'" in (
        loaded.stderr
    )
