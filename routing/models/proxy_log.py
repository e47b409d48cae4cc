"""Which egress each connection used recently (the egress-bucketed lock reads it)."""

from __future__ import annotations

from django.db import models


class ProxyLog(models.Model):
    """The last time a connection sent upstream through one egress (its proxy, or direct)."""

    provider = models.CharField(max_length=64)
    connection_id = models.BigIntegerField()
    egress = models.CharField(max_length=500, help_text="The proxy URL, or 'direct'.")
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "proxy_logs"
        constraints = [
            models.UniqueConstraint(fields=("connection_id", "egress"), name="uniq_proxy_log")
        ]
        indexes = [models.Index(fields=("provider", "egress", "seen_at"), name="proxy_log_lookup")]

    def __str__(self) -> str:
        return f"{self.provider}/{self.connection_id} via {self.egress}"
