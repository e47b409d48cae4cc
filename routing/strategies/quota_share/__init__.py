"""The ``quota-share`` strategy: weighted DRR with P2C on the requests in flight
(``drr``: the pure selection; ``orderer``: the strategy's orderer)."""

from __future__ import annotations

from routing.strategies.keys import execution_key

__all__ = ["execution_key"]  # the proxy's admission and metrics guards import it from here
