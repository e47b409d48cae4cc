"""The ``omniroute`` command that ``pip install`` puts on the PATH runs the management commands
as ``manage.py`` does, from anywhere, with no settings module or keys in the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest


def installed_command() -> Path:
    (script,) = entry_points(group="console_scripts", name="omniroute")
    assert script.value == "omniroute.cli:main"
    path = Path(sys.executable).parent / "omniroute"
    if not path.exists():
        pytest.fail(f"{path} is missing: install the package (make install)")
    return path


def run(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {
        name: value
        for name, value in os.environ.items()
        if name
        not in {"DJANGO_SETTINGS_MODULE", "OMNIROUTE_SECRET_KEY", "OMNIROUTE_ENCRYPTION_KEY"}
    }
    environment["OMNIROUTE_DATA_DIR"] = str(cwd)  # no dev.env there: help needs no keys
    return subprocess.run(
        [str(installed_command()), *arguments],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_omniroute_help_lists_the_commands(tmp_path: Path) -> None:
    done = run("--help", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Type 'omniroute help <subcommand>'" in done.stdout
    for command in ("serve", "importconfig", "exportconfig", "migrate"):
        assert f"    {command}\n" in done.stdout


def test_omniroute_help_of_a_command(tmp_path: Path) -> None:
    done = run("help", "importconfig", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: omniroute importconfig")
    assert "--prune" in done.stdout and "--dry-run" in done.stdout
