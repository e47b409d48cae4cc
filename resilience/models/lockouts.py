"""The model lockouts' database side: the durable copy of each connection's lock record, and an
admin entry for the locks, which live in the state store."""

from __future__ import annotations

from django.db import models


class ModelCooldown(models.Model):
    """Placeholder for the "Model cooldowns" admin page: no table, never queried."""

    class Meta:
        managed = False
        verbose_name = "model cooldown"
        verbose_name_plural = "model cooldowns"
        default_permissions = ("view", "change")  # see the page; unlock models

    def __str__(self) -> str:
        return f"Model cooldown {self.pk}"


class ModelLockRecord(models.Model):
    """The last persisted lock record of one connection (``resilience.services.lockouts``):
    restored into the state store when it may have lost it (a restart on the memory store,
    Redis flushed), so a locked model stays locked until its lock ends."""

    provider = models.CharField(max_length=200)
    connection_id = models.PositiveBigIntegerField()
    record = models.JSONField(help_text="The store's record: locks and failure states.")
    expires_at = models.DateTimeField(help_text="When the record's last lock ends.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "model_lock_records"
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "connection_id"], name="model_lock_record_per_connection"
            )
        ]
        indexes = [models.Index(fields=["expires_at"], name="model_lock_record_expiry")]

    def __str__(self) -> str:
        return f"Locks of {self.provider} connection {self.connection_id}"
