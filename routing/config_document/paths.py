"""Where a value sits in a document: a path of keys and indexes, and its line in the file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from routing.config_document.errors import Problem

Path = tuple[str | int, ...]


def path_text(path: Path) -> str:
    """``("connections", 2, "priority")`` → ``connections[2].priority``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


@dataclass(frozen=True)
class Lines:
    """The line of each path of a parsed file; a JSON body has none."""

    by_path: Mapping[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int | None:
        """The line of ``path``, else of its nearest parent that has one."""
        for end in range(len(path), -1, -1):
            line = self.by_path.get(path[:end])
            if line is not None:
                return line
        return None

    def problem(self, path: Path, message: str) -> Problem:
        """A problem at ``path``, with its line."""
        return Problem(path_text(path), message, self.line_of(path))


NO_LINES = Lines()  # a JSON body, or rows read from the database
