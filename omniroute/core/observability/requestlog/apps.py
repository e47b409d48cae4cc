"""The request log's Django app (its model, admin and migrations)."""

from __future__ import annotations

from django.apps import AppConfig


class RequestLogConfig(AppConfig):
    """The request log: one row per finished /v1 request."""

    name = "omniroute.core.observability.requestlog"
    label = "requestlog"
    verbose_name = "Request log"
    default_auto_field = "django.db.models.BigAutoField"
