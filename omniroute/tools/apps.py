from __future__ import annotations

from django.apps import AppConfig


class ToolsConfig(AppConfig):
    """Development tools: the fake upstream, the load generator, bench, soak, chaos,
    availability and the restart test, with their management commands. Installed only with
    debug on and in the test settings; the production image leaves this package out, and no
    product module imports it (docs/architecture.md)."""

    name = "omniroute.tools"
    label = "tools"
    verbose_name = "Development tools"
