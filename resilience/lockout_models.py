"""An admin entry for the model lockouts, which live in the state store and not in the database."""

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
