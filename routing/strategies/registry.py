"""Which orderer each combo strategy uses (docs/routing.md): a map from ``Strategy`` to the
function that orders a request's targets, filled from one module per family.

* ``priority``, ``fill-first``, ``context-relay``: the declared order
  (``routing.strategies.declared``; priority's fallback-only steps wait in
  ``routing.proxy.guards.fallback_only``, context-relay's handoff is
  ``routing.strategies.context_relay``);
* ``random``, ``strict-random``: a fresh shuffle; a shuffled deck per combo drawn without
  replacement (``routing.strategies.shuffle``);
* ``weighted``: a draw by step weight, the drawn step kept for ``stickyWeightedLimit``
  successes (``routing.strategies.weighted``);
* ``round-robin``: a rotation by the combo's request counter (``routing.strategies.round_robin``);
* ``least-used``, ``p2c``, ``lkgp``: the combo's per-target metrics and last-known-good
  target (``routing.strategies.metrics``);
* ``cost-optimized``, ``context-optimized``: the model catalog's input price and context
  window (``routing.strategies.catalog``);
* ``cache-optimized``: rendezvous hashing of the prompt's cache key
  (``routing.strategies.cache``);
* ``reset-aware``, ``reset-window``, ``headroom``: the accounts' quota snapshots
  (``routing.strategies.quota``);
* ``auto``: the weighted multi-factor score (``routing.strategies.auto``);
* ``quota-share``: weighted DRR with P2C on the requests in flight
  (``routing.strategies.quota_share``).

``fusion`` and ``pipeline`` are preludes, not orderers: they run before the dispatch
(``routing.proxy.preludes``), and the plan keeps its declared order here.
"""

from __future__ import annotations

from collections.abc import Mapping

from routing.domain.config.vocabulary import Strategy
from routing.strategies.auto.targets import order_auto
from routing.strategies.cache import order_cache
from routing.strategies.catalog import order_context, order_cost
from routing.strategies.declared import keep_order
from routing.strategies.metrics.orderer import order_least_used, order_lkgp, order_p2c
from routing.strategies.quota.orderer import order_by_quota
from routing.strategies.quota_share.orderer import order_quota_share
from routing.strategies.request import Orderer
from routing.strategies.round_robin import order_round_robin
from routing.strategies.shuffle import order_random, order_strict_random
from routing.strategies.weighted import order_weighted

ORDERERS: Mapping[Strategy, Orderer] = {
    Strategy.PRIORITY: keep_order,
    Strategy.FILL_FIRST: keep_order,
    Strategy.CONTEXT_RELAY: keep_order,
    Strategy.RANDOM: order_random,
    Strategy.STRICT_RANDOM: order_strict_random,
    Strategy.WEIGHTED: order_weighted,
    Strategy.ROUND_ROBIN: order_round_robin,
    Strategy.LEAST_USED: order_least_used,
    Strategy.P2C: order_p2c,
    Strategy.LKGP: order_lkgp,
    Strategy.COST_OPTIMIZED: order_cost,
    Strategy.CONTEXT_OPTIMIZED: order_context,
    Strategy.CACHE_OPTIMIZED: order_cache,
    Strategy.RESET_AWARE: order_by_quota,
    Strategy.RESET_WINDOW: order_by_quota,
    Strategy.HEADROOM: order_by_quota,
    Strategy.AUTO: order_auto,
    Strategy.QUOTA_SHARE: order_quota_share,
}
PRELUDES = frozenset({Strategy.FUSION, Strategy.PIPELINE})  # no orderer: the declared order


def orderer_for(strategy: str) -> Orderer | None:
    """The orderer of ``strategy``; None for a prelude or an unknown name (the declared order)."""
    return ORDERERS.get(Strategy(strategy)) if strategy in _NAMES else None


_NAMES = frozenset(Strategy)
