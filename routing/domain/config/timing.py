"""Small time arithmetic shared by the API, the admin and routing (pure)."""

from __future__ import annotations

import math
from datetime import datetime


def cooldown_remaining_seconds(until: datetime | None, now: datetime) -> int:
    """Whole seconds left before ``until`` (rounded up), 0 when none or past."""
    if until is None or until <= now:
        return 0
    return math.ceil((until - now).total_seconds())
