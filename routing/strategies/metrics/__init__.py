"""The strategies that read the combo's per-target metrics: ``least-used``, ``p2c`` and ``lkgp``
(``orders``: the pure orderings; ``orderer``: the strategy's orderers)."""
