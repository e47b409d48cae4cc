"""Breaker snapshots: the last persisted state of each provider's breaker."""

from __future__ import annotations

from django.db import models

from resilience.domain.breaker.state import BreakerState


class CircuitBreaker(models.Model):
    """Last persisted state of one provider's breaker (see
    ``resilience.domain.breaker.machine``)."""

    name = models.CharField(max_length=200, primary_key=True, help_text="The provider.")
    state = models.CharField(
        max_length=16, choices=[(s.value, s.value) for s in BreakerState], default="closed"
    )
    failure_count = models.PositiveIntegerField(default=0)
    last_failure_time = models.DateTimeField(null=True, blank=True)
    options = models.JSONField(default=dict, blank=True, help_text="The whole breaker record.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "domain_circuit_breakers"
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name
