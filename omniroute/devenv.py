"""The development keys ``make run`` keeps in ``data/dev.env``, and who reads them.

``python -m omniroute.devenv`` writes the file once (mode 0600): debug on, a fresh secret key and
a fresh Fernet key. An existing file is kept, since its key encrypts the demo's stored secrets.
The settings read it with django-environ only when it exists and ``OMNIROUTE_DEBUG`` is not
explicitly false in the real environment; real variables always win over it. A deployment has
no such file, so its refusals of missing or development keys stand (docs/configuration.md).

Nothing here imports Django: this runs before the settings load.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DEV_ENV_NAME = "dev.env"
# The spellings django-environ reads as true (environ.Env.BOOLEAN_TRUE_STRINGS).
TRUE_WORDS = ("true", "on", "ok", "y", "yes", "1")
HELP_FLAGS = ("-h", "--help")


def dev_env_path(environment: Mapping[str, str]) -> Path:
    """``dev.env`` in the data directory the settings use (``OMNIROUTE_DATA_DIR`` or ``data/``)."""
    data_dir = environment.get("OMNIROUTE_DATA_DIR") or str(BASE_DIR / "data")
    return Path(data_dir) / DEV_ENV_NAME


def debug_explicitly_off(environment: Mapping[str, str]) -> bool:
    """``OMNIROUTE_DEBUG`` is set to anything django-environ does not read as true."""
    value = environment.get("OMNIROUTE_DEBUG")
    return value is not None and value.strip().lower() not in TRUE_WORDS


def dev_env_to_read(environment: Mapping[str, str]) -> Path | None:
    """The file the settings should read, or ``None`` (absent, or debug explicitly off)."""
    path = dev_env_path(environment)
    if debug_explicitly_off(environment) or not path.is_file():
        return None
    return path


def fernet_key() -> str:
    """A new Fernet key (32 random bytes in URL-safe base64), without importing cryptography."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")


def dev_env_text() -> str:
    return (
        "# Written by `make run` for this checkout's demo: development only, never deployed.\n"
        "OMNIROUTE_DEBUG=1\n"
        f"OMNIROUTE_SECRET_KEY={secrets.token_urlsafe(50)}\n"
        f"OMNIROUTE_ENCRYPTION_KEY={fernet_key()}\n"
    )


def write_dev_env(path: Path) -> bool:
    """Write ``path`` with fresh keys, readable by its owner only; ``False`` when it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(dev_env_text())
    return True


def asks_only_for_help(argv: Sequence[str]) -> bool:
    """The ``manage.py`` command line only prints help (argparse stops at ``-h``/``--help``)."""
    arguments = list(argv[1:])
    if not arguments or arguments[0] == "help":
        return True
    return any(argument in HELP_FLAGS for argument in arguments)


def help_placeholders(environment: Mapping[str, str]) -> dict[str, str]:
    """Throwaway keys for a help run that has none: help never reads secrets or data."""
    placeholders = {
        "OMNIROUTE_SECRET_KEY": secrets.token_urlsafe(50),
        "OMNIROUTE_ENCRYPTION_KEY": fernet_key(),
    }
    return {name: value for name, value in placeholders.items() if not environment.get(name)}


def main() -> None:
    path = dev_env_path(os.environ)
    if write_dev_env(path):
        print(f"development keys written to {path} (mode 0600)")
    else:
        print(f"development keys: {path} (kept)")


if __name__ == "__main__":
    main()
