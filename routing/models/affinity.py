"""Session-affinity pins: the durable copy of which connection each client session is on."""

from __future__ import annotations

from django.db import models

from routing.models.providers import Provider, ProviderConnection


class SessionAffinityPin(models.Model):
    """One session's pin to a connection of a provider; the state
    store holds the live pin, this row is its copy for restarts (see ``routing.proxy.affinity``)."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="+")
    key_hash = models.CharField(
        max_length=64,
        help_text="SHA-256 of the provider, the client key and the session key; the session "
        "id itself is never stored.",
    )
    connection = models.ForeignKey(
        ProviderConnection, on_delete=models.CASCADE, related_name="affinity_pins"
    )
    created_at = models.DateTimeField(help_text="When the session came to this connection.")
    last_used_at = models.DateTimeField(help_text="The session's latest request here.")
    expires_at = models.DateTimeField(
        db_index=True, help_text="When the pin lapses unless the session asks again."
    )

    class Meta:
        ordering = ("-last_used_at", "id")
        constraints = [
            models.UniqueConstraint(fields=("provider", "key_hash"), name="uniq_affinity_pin")
        ]

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.key_hash[:12]}… → {self.connection_id}"
