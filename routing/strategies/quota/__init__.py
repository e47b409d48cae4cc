"""The strategies that rank by the accounts' quota: ``reset-aware``, ``reset-window`` and
``headroom`` (``reset``: the pure orderings; ``orderer``: the strategies' orderer)."""
