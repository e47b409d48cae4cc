"""Child interpreters that import the code that started them, wherever they are started from.

``python -m module`` looks for ``module`` in the working directory first: a server started by
``manage.py serve`` from another checkout's directory served that checkout's code (the paired
bench's sides each ran the bench's own). ``-P`` leaves the working directory out, and
``PYTHONPATH`` puts the directory holding this code first (docs/architecture.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ROOT", "child_environ", "python_module"]

ROOT = Path(__file__).resolve().parents[2]  # holds omniroute, routing, resilience, leases


def python_module(module: str) -> list[str]:
    """The command line running ``module`` with this interpreter, not from the working
    directory."""
    return [sys.executable, "-P", "-m", module]


def child_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with :data:`ROOT` first on ``PYTHONPATH``."""
    rest = environ.get("PYTHONPATH", "")
    return {**environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), rest)))}
