#!/usr/bin/env python
"""Django's command-line utility for administrative tasks (the installed ``omniroute`` command
runs the same: ``omniroute.cli``)."""

from __future__ import annotations

from omniroute.cli import main

if __name__ == "__main__":
    main()
