"""``make chaos``: injected upstream faults and a Redis kill under a bounded load (see run)."""
