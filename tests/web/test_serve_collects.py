"""``manage.py serve`` collects the static files before it hands over to daphne."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

from django.core.management import call_command
from pytest_django.fixtures import Settings


def test_serve_collects_static_files_then_starts_daphne(settings: Settings, tmp_path: Path) -> None:
    settings.STATIC_ROOT = tmp_path / "static"
    with patch("os.execv") as execv:
        call_command("serve", "--port", "8123")
    assert (tmp_path / "static/admin/css/base.css").is_file()
    assert (tmp_path / "static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css").is_file()
    argv = execv.call_args.args[1]
    assert argv[1:4] == ["-P", "-m", "omniroute.server"] and "8123" in argv


def test_no_collectstatic_leaves_static_root_alone(settings: Settings, tmp_path: Path) -> None:
    settings.STATIC_ROOT = tmp_path / "static"
    with patch("os.execv") as execv:
        call_command("serve", "--no-collectstatic")
    assert not (tmp_path / "static").exists()
    execv.assert_called_once()
