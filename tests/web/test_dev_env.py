"""``make run``'s development keys in ``data/dev.env``: the settings read them when the file is
there and debug is not explicitly off, real variables win, and the README's ``manage.py``
commands then work in a plain shell; without the file a production start still refuses, while
help never needs a key."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from omniroute.devenv import dev_env_path, write_dev_env

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import omniroute.settings as s; "
    "print(s.DEBUG, s.SECRET_KEY, ','.join(s.ENCRYPTION_KEYS), s.SECRET_KEY == s.DEV_SECRET_KEY)"
)
TIMEOUT = 120


def dev_values(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    pairs = (line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return {name: value for name, value in pairs}


def plain_shell(data_dir: Path, **variables: str) -> dict[str, str]:
    """What a fresh terminal holds: no OMNIROUTE_* nor DJANGO_* variable but the data dir."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(data_dir)}
    env.update(OMNIROUTE_DATA_DIR=str(data_dir), **variables)
    return env


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )


def probe(data_dir: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    return run(["-c", PROBE], plain_shell(data_dir, **variables))


def manage(data_dir: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return run(["manage.py", *args], plain_shell(data_dir, **variables))


def with_dev_env(tmp_path: Path) -> dict[str, str]:
    path = dev_env_path({"OMNIROUTE_DATA_DIR": str(tmp_path)})
    assert write_dev_env(path)
    return dev_values(path)


def test_the_file_is_fresh_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dev.env"
    assert write_dev_env(path)
    first = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not write_dev_env(path)
    assert path.read_text() == first
    values = dev_values(path)
    assert values["OMNIROUTE_DEBUG"] == "1"
    assert len(values["OMNIROUTE_ENCRYPTION_KEY"]) == 44
    assert write_dev_env(tmp_path / "other.env")
    assert dev_values(tmp_path / "other.env") != values  # generated, never a fixed key


def test_the_settings_read_the_file_with_debug_unset(tmp_path: Path) -> None:
    values = with_dev_env(tmp_path)
    loaded = probe(tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    expected = [values["OMNIROUTE_SECRET_KEY"], values["OMNIROUTE_ENCRYPTION_KEY"], "False"]
    assert loaded.stdout.split() == ["True", *expected]


def test_debug_explicitly_off_ignores_the_file(tmp_path: Path) -> None:
    with_dev_env(tmp_path)
    for value in ("0", "false", "off"):
        loaded = probe(tmp_path, OMNIROUTE_DEBUG=value)
        assert loaded.returncode != 0
        assert "ImproperlyConfigured: OMNIROUTE_SECRET_KEY is not set" in loaded.stderr


def test_real_variables_win_over_the_file(tmp_path: Path) -> None:
    values = with_dev_env(tmp_path)
    loaded = probe(tmp_path, OMNIROUTE_SECRET_KEY="a-real-secret-" + "x" * 40)
    assert loaded.returncode == 0, loaded.stderr
    expected = ["a-real-secret-" + "x" * 40, values["OMNIROUTE_ENCRYPTION_KEY"], "False"]
    assert loaded.stdout.split() == ["True", *expected]


# Every ``manage.py`` command line the README, the docs and ``make run``'s banner print.
PRINTED_COMMAND = re.compile(r"\.venv/bin/python manage\.py ([a-z_]+[^`\n#]*)")
# Interactive commands get their input as the docs' prompts would: ``--noinput`` and these.
SUPERUSER = {
    "DJANGO_SUPERUSER_USERNAME": "operator",
    "DJANGO_SUPERUSER_EMAIL": "operator@example.com",
    "DJANGO_SUPERUSER_PASSWORD": "a-long-enough-password",
}


def printed_commands(*texts: str) -> list[list[str]]:
    """Each distinct command line in ``texts``, in order, as an argument list."""
    found: dict[str, list[str]] = {}
    for text in texts:
        for match in PRINTED_COMMAND.finditer(text):
            line = match.group(1).strip()
            found.setdefault(line, shlex.split(line))
    return list(found.values())


def test_printed_commands_are_found() -> None:
    text = (
        "run `.venv/bin/python manage.py createsuperuser` or\n"
        ".venv/bin/python manage.py rotatekeys  # a note"
    )
    assert printed_commands(text, text) == [["createsuperuser"], ["rotatekeys"]]


def test_the_readme_commands_work_in_a_plain_shell_after_make_run(tmp_path: Path) -> None:
    with_dev_env(tmp_path)
    # make run's setup step: migrate, then the demo (whose banner prints commands too).
    assert manage(tmp_path, "migrate", "--noinput").returncode == 0
    seeded = manage(tmp_path, "seeddemo", "--upstream-url", "http://127.0.0.1:9/v1")
    assert seeded.returncode == 0, seeded.stderr
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    commands = printed_commands(seeded.stdout, *(path.read_text() for path in docs))
    names = {args[0] for args in commands}
    assert {"createsuperuser", "createapikey", "rotatekeys"} <= names, names
    for args in commands:
        variables = SUPERUSER if args[0] == "createsuperuser" else {}
        if args[0] == "createsuperuser":
            args = [*args, "--noinput"]
        done = manage(tmp_path, *args, **variables)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr, args
    for args in (["seeddemo", "--help"], ["help"]):
        assert manage(tmp_path, *args).returncode == 0, args
    minted = manage(tmp_path, "createapikey", "--name", "operator-2", "--scope", "manage")
    assert minted.returncode == 0, minted.stderr
    assert minted.stdout.strip()


def test_without_the_file_a_start_refuses_but_help_needs_no_key(tmp_path: Path) -> None:
    refused = manage(tmp_path, "migrate", "--noinput")
    assert refused.returncode != 0
    assert "ImproperlyConfigured: OMNIROUTE_SECRET_KEY is not set" in refused.stderr
    for args in (["help"], ["seeddemo", "--help"], ["createapikey", "-h"], ["help", "serve"]):
        done = manage(tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "dev.env").exists()
