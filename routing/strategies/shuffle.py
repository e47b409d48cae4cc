"""The random family: ``random`` (a fresh Fisher-Yates shuffle per request) and
``strict-random`` (a shuffled deck per combo, drawn without replacement: over N requests on N
distinct execution keys every target comes first exactly once).
"""

from __future__ import annotations

from collections.abc import Sequence

from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.strategies import sources
from routing.strategies.draws import Deck, RandomSource, fisher_yates
from routing.strategies.keys import execution_key
from routing.strategies.request import Ordered, OrderRequest


def shuffled(targets: Sequence[Target], rng: RandomSource) -> tuple[Target, ...]:
    """Random: a Fisher-Yates shuffle of all targets (N - 1 ``rng.random()`` calls, from
    the last position down, each swapping position i with a random position in 0..i)."""
    items = list(targets)
    fisher_yates(items, rng)
    return tuple(items)


def strict_random(targets: Sequence[Target], deck: Deck, rng: RandomSource) -> tuple[Target, ...]:
    """Strict-random: draw the next execution key from ``deck`` (this combo's deck, refilled
    with a fresh shuffle when empty or when the targets' key set changed), put its target
    first (the first one, if two targets share the key) and the rest after it, freshly
    shuffled. Over N requests on N distinct keys every target comes first exactly once."""
    if not targets:
        return ()
    keys = [execution_key(t) for t in targets]
    drawn = keys.index(deck.draw(keys, rng))
    rest = [t for i, t in enumerate(targets) if i != drawn]
    fisher_yates(rest, rng)
    return (targets[drawn], *rest)


async def order_random(request: OrderRequest, store: StateStore) -> Ordered:
    """``random``: a fresh shuffle."""
    return Ordered(shuffled(request.plan.targets, sources.rng))


async def order_strict_random(request: OrderRequest, store: StateStore) -> Ordered:
    """``strict-random``: the next card of the combo's deck first (this process's deck)."""
    deck = _deck(request.plan.combo or "")
    return Ordered(strict_random(request.plan.targets, deck, sources.rng))


def _deck(combo: str) -> Deck:
    decks = sources.decks
    deck = decks.get(combo)
    if deck is None:
        if len(decks) >= sources.MAX_DECKS:
            decks.pop(next(iter(decks)))
        deck = decks[combo] = Deck()
    return deck
