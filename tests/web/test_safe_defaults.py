"""The settings' safe defaults: debug off unless asked for, and no start without a secret key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import omniroute.settings as s; print(s.DEBUG, s.SECRET_KEY == s.DEV_SECRET_KEY)"


def load_settings(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNIROUTE_", "DJANGO_"))}
    env.update(OMNIROUTE_DATA_DIR=str(tmp_path), **variables)
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_debug_is_off_by_default(tmp_path: Path) -> None:
    loaded = load_settings(
        tmp_path,
        OMNIROUTE_SECRET_KEY="a-real-secret-" + "x" * 40,
        OMNIROUTE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["False", "False"]


def test_a_missing_secret_key_with_debug_off_stops_the_start(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path)
    assert loaded.returncode != 0
    assert "ImproperlyConfigured: OMNIROUTE_SECRET_KEY is not set" in loaded.stderr


def test_the_development_key_is_refused_with_debug_off(tmp_path: Path) -> None:
    from omniroute.settings import DEV_SECRET_KEY

    loaded = load_settings(tmp_path, OMNIROUTE_SECRET_KEY=DEV_SECRET_KEY, OMNIROUTE_DEBUG="0")
    assert loaded.returncode != 0
    assert "is the development key" in loaded.stderr


def test_debug_on_runs_the_demo_with_the_development_key(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path, OMNIROUTE_DEBUG="1")
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["True", "True"]
