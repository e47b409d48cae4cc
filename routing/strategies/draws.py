"""Random draws shared by the orderings that draw (pure).

Randomness comes from an injected ``rng`` (a ``random.Random`` or anything with ``random()``
returning a float in [0, 1)); only ``rng.random()`` is called, and a random index below ``n``
is ``int(rng.random() * n)`` (clamped to ``n - 1``), so a seeded ``random.Random`` gives a
reproducible order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")


class RandomSource(Protocol):
    """The randomness the orderings use: ``random.Random`` satisfies it."""

    def random(self) -> float:
        """A float in [0, 1)."""
        ...


def random_index(rng: RandomSource, n: int) -> int:
    """A random index in ``range(n)`` (``n`` >= 1) from one ``rng.random()`` call."""
    return min(int(rng.random() * n), n - 1)


def fisher_yates(items: list[T], rng: RandomSource) -> None:
    """Shuffle ``items`` in place: for i from the last index down to 1, swap item i with a
    random item j in 0..i (``random_index(rng, i + 1)``)."""
    for i in range(len(items) - 1, 0, -1):
        j = random_index(rng, i + 1)
        items[i], items[j] = items[j], items[i]


class Deck:
    """The strict-random state of one combo: the execution keys not drawn yet, and the key
    set they were dealt from. Not thread-safe (one event loop; the caller serialises)."""

    __slots__ = ("_cards", "_members")

    def __init__(self) -> None:
        self._cards: list[str] = []  # drawn from the end
        self._members: frozenset[str] = frozenset()

    @property
    def remaining(self) -> tuple[str, ...]:
        """The keys still to be drawn, the next one first."""
        return tuple(reversed(self._cards))

    def draw(self, keys: Sequence[str], rng: RandomSource) -> str:
        """The next key, after a refill (a fresh shuffle of the distinct ``keys``) when the
        deck is empty or was dealt from another key set."""
        members = frozenset(keys)
        if not self._cards or members != self._members:
            cards = list(dict.fromkeys(keys))
            for i in range(len(cards) - 1, 0, -1):
                j = random_index(rng, i + 1)
                cards[i], cards[j] = cards[j], cards[i]
            self._cards = cards
            self._members = members
        return self._cards.pop()
