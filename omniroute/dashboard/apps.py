"""Wires the dashboard's publishers to what they report: resilience events and requests."""

from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "omniroute.dashboard"
    label = "dashboard"
    verbose_name = "Live dashboard"

    def ready(self) -> None:
        from omniroute.core.events import listen
        from omniroute.dashboard.events import publisher, traffic
        from routing.proxy.telemetry import on_request

        listen(publisher.on_event)
        on_request(traffic.record)
