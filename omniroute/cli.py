"""The ``omniroute`` command that ``pip install`` puts on the PATH: ``manage.py`` without the
checkout (``omniroute serve``, ``omniroute importconfig gateway.yaml``, ``omniroute --help``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from omniroute.devenv import asks_only_for_help, dev_env_to_read, help_placeholders

SETTINGS_MODULE = "omniroute.settings"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the management command named in ``argv`` (the process's own by default)."""
    arguments = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    # Help never needs secrets: a run that only prints help, with no key set and no dev.env to
    # read, gets throwaway keys for itself. Every other command still needs real ones.
    if asks_only_for_help(arguments) and dev_env_to_read(os.environ) is None:
        os.environ.update(help_placeholders(os.environ))
    from django.core.management import execute_from_command_line

    execute_from_command_line(arguments)


if __name__ == "__main__":
    main()
