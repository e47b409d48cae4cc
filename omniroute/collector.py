"""The garbage collector of a serving process, tuned once the application is loaded.

Every proxied request allocates a few thousand short-lived containers (dicts of the payload,
dataclasses of the attempt), and CPython starts a young-generation collection every 700
allocations by default: several per request, each also scanning what survived the previous
ones. What the process built while starting (modules, settings, the application) lives as long
as the process; freezing it keeps the older-generation collections from walking it again and
again.
"""

from __future__ import annotations

import gc


def tune_collector(gen0_threshold: int) -> None:
    """Freeze what exists now out of future collections, and collect the young generation every
    ``gen0_threshold`` allocations (the older generations' thresholds are kept)."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
