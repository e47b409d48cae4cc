"""Exclusive connection leases: one row per binding of a lease owner to a provider connection.
``leases.services`` is the only writer; see ``leases.domain.leasing``."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from leases.domain.states import EndReason, LeaseState

STATE_CHOICES = [(state.value, state.value) for state in LeaseState]
END_REASON_CHOICES = [(reason.value, reason.value) for reason in EndReason]
ACTIVE = Q(state=LeaseState.ACTIVE.value)


class ExclusiveConnectionLease(models.Model):
    """One lease row: ACTIVE while it binds, then kept as history (its generation stays used).

    The key and the connection are plain ids, not foreign keys: the history must outlive a
    deleted key or connection (otherwise a deleted key would take its generations with it, and
    an old generation could become valid again), and the lease layer sits below routing, so its
    schema does not depend on routing's tables.
    """

    lease_owner_hash = models.CharField(
        max_length=64, help_text="SHA-256 of the owner token; the token itself is never stored."
    )
    api_key_id = models.PositiveBigIntegerField(help_text="The client API key holding the lease.")
    provider = models.CharField(max_length=64)
    connection_id = models.PositiveBigIntegerField(help_text="The provider connection bound.")
    generation = models.PositiveBigIntegerField()
    state = models.CharField(max_length=16, choices=STATE_CHOICES, default=LeaseState.ACTIVE.value)
    acquired_at = models.DateTimeField()
    renewed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=32, choices=END_REASON_CHOICES, blank=True)

    class Meta:
        db_table = "exclusive_connection_leases"
        ordering = ("-id",)
        constraints = [
            models.CheckConstraint(
                condition=Q(lease_owner_hash__regex=r"\A[0-9a-f]{64}\Z"),
                name="lease_owner_hash_is_sha256_hex",
            ),
            models.CheckConstraint(condition=Q(generation__gte=1), name="lease_generation_gt_0"),
            models.CheckConstraint(
                condition=Q(state__in=[state.value for state in LeaseState]),
                name="lease_state_valid",
            ),
            # One ACTIVE lease per owner and one per connection, across every key and process.
            models.UniqueConstraint(
                fields=["lease_owner_hash"], condition=ACTIVE, name="lease_one_active_per_owner"
            ),
            models.UniqueConstraint(
                fields=["connection_id"], condition=ACTIVE, name="lease_one_active_per_connection"
            ),
        ]
        indexes = [
            models.Index(
                fields=["lease_owner_hash", "generation", "id"], name="lease_owner_history"
            ),
            models.Index(fields=["expires_at"], condition=ACTIVE, name="lease_active_expiry"),
        ]

    def __str__(self) -> str:
        return f"Lease {self.lease_owner_hash[:12]}… gen {self.generation} ({self.state})"
