"""Linear-time text matching for the classifier's fixed patterns (pure, stdlib only).

Upstream error bodies can be large and hostile. A backtracking ``a.*b.*c`` costs quadratic (or
worse) time on a body that repeats ``a`` without ``b``; :class:`InOrder` answers the same
question, line by line (``.`` does not match a newline), in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

_I = re.IGNORECASE


class Matcher(Protocol):
    """Anything with ``search(text)`` whose result is truthy on a match."""

    def search(self, text: str, /) -> object: ...


@dataclass(frozen=True, slots=True)
class InOrder:
    """Parts found in this order on one line: ``a.*b`` without quadratic backtracking."""

    parts: tuple[re.Pattern[str], ...]

    def search(self, text: str, /) -> bool:
        """Whether some line holds every part, each after the previous one's match."""
        return any(self._on_line(line) for line in text.split("\n"))

    def _on_line(self, line: str) -> bool:
        # The leftmost match of each part ends earliest, so it leaves the most room for the
        # next part: if it fails, no later match of the same part can succeed.
        position = 0
        for part in self.parts:
            found = part.search(line, position)
            if found is None:
                return False
            position = found.end()
        return True


def pattern(source: str, flags: int = _I) -> Matcher:
    """Compile one of our fixed patterns; ``.*`` gaps become an :class:`InOrder` search."""
    parts = source.split(".*")
    if len(parts) == 1:
        return re.compile(source, flags)
    return InOrder(tuple(re.compile(part, flags) for part in parts))


def contains_any(text: str, phrases: Iterable[str]) -> bool:
    """Whether ``text`` contains any non-empty phrase, ignoring case."""
    lower = text.lower()
    return any(phrase and phrase.lower() in lower for phrase in phrases)


def matches_any(text: str, patterns: Iterable[Matcher]) -> bool:
    """Whether any of the fixed ``patterns`` occurs in ``text``."""
    return any(matcher.search(text) for matcher in patterns)
