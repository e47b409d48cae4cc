"""The development tools never ship: the image's build context leaves ``omniroute/tools`` out,
and production settings (debug off) install no tools app, so ``manage.py help`` lists none of
its commands. Nothing here runs docker; the help runs in a child process with the production
settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL_COMMANDS = (
    "availability",
    "bench",
    "benchpair",
    "benchprofile",
    "chaos",
    "fakeupstream",
    "restarttest",
    "soak",
)


def _help(debug: str) -> str:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "omniroute.settings",
        "OMNIROUTE_DEBUG": debug,
        "OMNIROUTE_SECRET_KEY": "production-help-test-only",
        "OMNIROUTE_ENCRYPTION_KEY": "yeh6il2Z49NZncAlHjkRsjWxYa_6wLA3loXFgGngBp8=",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _commands(listing: str) -> set[str]:
    return {line.strip() for line in listing.splitlines() if line.startswith("    ")}


def test_the_image_leaves_the_tools_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "omniroute/tools" in ignored


def test_production_settings_list_no_tool_command() -> None:
    commands = _commands(_help("0"))
    assert "serve" in commands
    assert commands.isdisjoint(TOOL_COMMANDS)


def test_debug_settings_list_the_tool_commands() -> None:
    assert set(TOOL_COMMANDS) <= _commands(_help("1"))
