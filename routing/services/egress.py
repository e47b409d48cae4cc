"""The proxy log: which egress each connection used, for the egress-bucketed lock."""

from __future__ import annotations

from datetime import datetime

from routing.models import ProxyLog


def proxy_log_touch(*, provider: str, connection_id: int, egress: str, now: datetime) -> None:
    """Record that the connection just sent upstream through ``egress``."""
    ProxyLog.objects.update_or_create(
        connection_id=connection_id,
        egress=egress,
        defaults={"provider": provider, "seen_at": now},
    )
