"""Client API keys: what a client presents to the gateway."""

from __future__ import annotations

from datetime import datetime

from django.db import models

from routing.domain.config.keys import key_is_usable


class ClientApiKey(models.Model):
    """A client credential; only its SHA-256 and a display prefix are stored."""

    name = models.CharField(max_length=120)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    scopes = models.JSONField(default=list, blank=True)
    allowed_models = models.JSONField(
        default=list,
        blank=True,
        help_text="`provider/model`, `provider/*` or combo names; empty allows all.",
    )
    allowed_connections = models.ManyToManyField(
        "routing.ProviderConnection", blank=True, related_name="+"
    )
    is_active = models.BooleanField(default=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name", "id")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_usable(self, now: datetime) -> bool:
        """Active, not revoked and not expired at ``now``."""
        return key_is_usable(
            is_active=self.is_active,
            revoked_at=self.revoked_at,
            expires_at=self.expires_at,
            now=now,
        )
