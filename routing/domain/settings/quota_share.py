"""Per-connection serialization of quota-share dispatch (the ``quotaShareConcurrencyLimit``
settings section), pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuotaShareSettings:
    """The ``quotaShareConcurrencyLimit`` settings section.

    ``enabled``: a quota-share dispatch to a connection with a positive ``max_concurrent`` takes
    a slot on that connection's semaphore first (queued within the combo's queue timeout and
    depth; a full queue or a timeout proceeds without a slot). Like the request queue, it is a
    local gate: it never makes an upstream failure.
    """

    enabled: bool = True
