"""The request log's table: one row per finished /v1 request."""

from __future__ import annotations

from django.db import models


class RequestLogEntry(models.Model):
    """One finished /v1 request: who asked for what, what answered, and the decision trail."""

    request_id = models.CharField(
        max_length=64, unique=True, help_text="The X-OmniRoute-Request-Id the client got."
    )
    started_at = models.DateTimeField(help_text="When the request arrived.")
    key_name = models.CharField(max_length=200, blank=True)
    key_prefix = models.CharField(max_length=32, blank=True, help_text="Never the key itself.")
    endpoint = models.CharField(max_length=100)
    model = models.CharField(max_length=200, blank=True, help_text="The model the client asked.")
    provider = models.CharField(max_length=64, blank=True, help_text="The provider that answered.")
    target_model = models.CharField(max_length=200, blank=True)
    connection_id = models.BigIntegerField(null=True, blank=True)
    connection_name = models.CharField(max_length=200, blank=True)
    status = models.PositiveSmallIntegerField(help_text="499: the client left before an answer.")
    error_code = models.CharField(max_length=100, blank=True)
    latency_ms = models.PositiveIntegerField()
    time_to_first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    tokens_in = models.PositiveIntegerField(null=True, blank=True)
    tokens_out = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    trail = models.JSONField(
        default=list, blank=True, help_text="Every target considered: tried or skipped, and why."
    )

    class Meta:
        db_table = "request_log"
        verbose_name = "request"
        ordering = ("-started_at", "-id")
        indexes = [
            models.Index(fields=("started_at",), name="request_log_started"),
            models.Index(fields=("provider", "started_at"), name="request_log_provider"),
        ]

    def __str__(self) -> str:
        return self.request_id


# Every column a finished request's record fills (all but the row id), in the table's order:
# what the write path inserts and the API shows.
RECORDED = tuple(
    field.name for field in RequestLogEntry._meta.concrete_fields if not field.primary_key
)
