"""Words for the settings page: a heading per group, a label and a help text per setting.

Each section brings its own words (``Section.headings`` and ``Section.words``, declared by the
app that owns it); this module looks them up in the registry. A setting without words still
gets a label made from its name (``label_for``), and a test keeps the tables whole.
"""

from __future__ import annotations

import re

from omniroute.core.settings import SETTINGS


def _words(name: str) -> str:
    """``maxWaitMs`` → "Max wait (ms)": a fallback label for a setting not in the table."""
    unit = " (ms)" if name.endswith("Ms") else ""
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", name.removesuffix("Ms")).lower()
    return words.capitalize() + unit


def label_for(path: str) -> str:
    """The setting's label in words."""
    words = SETTINGS.words(path)
    return words[0] if words else _words(path.rsplit(".", 1)[-1])


def help_for(path: str, own_help: str) -> str:
    """What the setting does, in words (``own_help``, the field's own, when none is given)."""
    words = SETTINGS.words(path)
    return words[1] if words else own_help


def group_heading(group: str) -> tuple[str, str]:
    """The group's heading and one-line description."""
    return SETTINGS.heading(group) or (group, "")
