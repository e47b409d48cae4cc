"""``GET /metrics``: the gateway's Prometheus exposition (the text format).

Two parts, concatenated: the request metrics that the /v1 proxy counts
(``routing.telemetry``, plus the library's process metrics), and the resilience gauges read
from the state store at scrape time (``resilience.metrics``).

With ``PROMETHEUS_MULTIPROC_DIR`` set (before the processes start, to an empty directory that
every gateway process on the host can write), ``prometheus_client`` keeps each process's
counters in files there and this view adds up all of them, so any process can be scraped.
Without it the counters are this process's own. The endpoint is unauthenticated, as
Prometheus expects; keep it off the public network at the load balancer if that matters.
"""

from __future__ import annotations

import os

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from resilience.metrics import ResilienceCollector

__all__ = ["metrics", "request_registry"]

MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

_state_registry = CollectorRegistry(auto_describe=False)
_state_registry.register(ResilienceCollector())


def request_registry() -> CollectorRegistry:
    """The registry of the counted metrics: every process's files in multiprocess mode, the
    library's default registry (this process) otherwise."""
    if not os.environ.get(MULTIPROC_DIR_VARIABLE):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The exposition of both registries."""
    body = generate_latest(request_registry()) + generate_latest(_state_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
