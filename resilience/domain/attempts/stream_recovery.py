"""What the gateway does when a stream goes wrong (the ``streamRecovery`` settings section), pure.

* ``enabled``: before the client has received a byte, a stream that broke off may be reopened
  once on the same target (same connection, same model) before the request fails over.
* ``continue_mid_stream``: after the client has received bytes, a cut stream may be completed
  (continued from the text already sent, or regenerated and spliced on an exact prefix) rather
  than ended with an error. On by default here, unlike the reference.
* ``watchdog``: abort an upstream attempt whose stream still flows but carries too little
  useful text (see ``routing.domain.streams.throughput``); off by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_WARMUP_MS = 30_000
DEFAULT_WINDOW_MS = 30_000
DEFAULT_MIN_USEFUL_BYTES_PER_SECOND = 4
DEFAULT_MIN_USEFUL_BYTES = 1


@dataclass(frozen=True, slots=True)
class WatchdogSettings:
    """The throughput watchdog: once ``warmup_ms`` + ``window_ms`` have passed since a stream's
    first event, an attempt whose useful text over the last ``window_ms`` falls below
    ``min_useful_bytes_per_second`` is aborted (a window holding fewer than
    ``min_useful_bytes``, but more than none, is too small to judge)."""

    enabled: bool = False
    warmup_ms: int = DEFAULT_WARMUP_MS
    window_ms: int = DEFAULT_WINDOW_MS
    min_useful_bytes_per_second: int = DEFAULT_MIN_USEFUL_BYTES_PER_SECOND
    min_useful_bytes: int = DEFAULT_MIN_USEFUL_BYTES


@dataclass(frozen=True, slots=True)
class StreamRecoverySettings:
    """The ``streamRecovery`` settings section, already in range."""

    enabled: bool = False
    continue_mid_stream: bool = True
    watchdog: WatchdogSettings = field(default_factory=WatchdogSettings)
