"""What the orderers draw on that tests replace, in one place: the random sources, the clocks,
and this process's memory of the strategies that keep it (read at each call, so that a test
may swap any of them).

* ``rng``: random, strict-random, weighted and p2c draws; ``auto_rng``: auto's exploration;
* ``clock``: monotonic seconds (quota-share's in-flight slots); ``wall_clock``: epoch seconds
  (the metrics records' ages, the quota snapshots' resets);
* ``decks``: strict-random's deck per combo; ``quota_share_state``: quota-share's deficits and
  slots.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from routing.strategies.draws import Deck
from routing.strategies.quota_share.drr import QuotaShareState

rng: random.Random = random.Random()
auto_rng: random.Random = random.Random()
clock: Callable[[], float] = time.monotonic
wall_clock: Callable[[], float] = time.time
decks: dict[str, Deck] = {}  # this process's, the least recently created dropped first
quota_share_state = QuotaShareState()  # this process's deficits and in-flight slots
MAX_DECKS = 200
