"""Problems with a configuration document, each naming its field and, from a file, its line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One bad value: its path in the document (``connections[2].priority``), its line in the
    file (1-based; ``None`` for a JSON body) and what is wrong."""

    path: str
    message: str
    line: int | None = None

    def describe(self, source: str = "") -> str:
        """``source:line: path: message`` (the parts that are known)."""
        where = f"{source}:{self.line}: " if self.line is not None else ""
        if source and self.line is None:
            where = f"{source}: "
        return f"{where}{self.path}: {self.message}" if self.path else f"{where}{self.message}"


class ConfigError(ValueError):
    """A document that cannot be applied; ``problems`` lists every bad value found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(p.describe() for p in self.problems))

    def describe(self, source: str = "") -> str:
        """One line per problem, each prefixed with ``source`` and the line."""
        return "\n".join(problem.describe(source) for problem in self.problems)
