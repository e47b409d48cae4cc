"""``GET /metrics``: the gateway's Prometheus exposition (the text format).

Two parts of the gateway's metrics registry (``omniroute.core.observability.metrics``),
concatenated: the request metrics the apps push as requests finish (plus the library's process
metrics), and the gauges read at scrape time by the collectors the apps registered (resilience's
state-store counts, routing's per-provider gauges).

With ``PROMETHEUS_MULTIPROC_DIR`` set (before the processes start, to an empty directory that
every gateway process on the host can write), ``prometheus_client`` keeps each process's
counters in files there and this view adds up all of them, so any process can be scraped.
Without it the counters are this process's own. With ``OMNIROUTE_METRICS_TOKEN`` set, a scrape
must send ``Authorization: Bearer <token>`` (Prometheus's ``authorization`` setting), else it
gets a JSON 401; unset, the endpoint is open, as Prometheus expects, and is best kept off the
public network at the load balancer (docs/configuration.md).
"""

from __future__ import annotations

import hmac
import os

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from omniroute.core.observability.metrics import state_registry

__all__ = ["metrics", "request_registry"]

MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


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
    """The exposition of both registries (to a scraper with the token, when one is set)."""
    if not _authorized(request):
        return _unauthorized()
    body = generate_latest(request_registry()) + generate_latest(state_registry())
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _authorized(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        return True
    presented = request.headers.get("Authorization", "")
    return hmac.compare_digest(presented.encode(), f"Bearer {token}".encode())


def _unauthorized() -> HttpResponse:
    message = "GET /metrics needs the metrics bearer token (OMNIROUTE_METRICS_TOKEN)."
    error = {"message": message, "type": "authentication_error", "code": "invalid_metrics_token"}
    response = JsonResponse({"error": error}, status=401)
    response["WWW-Authenticate"] = "Bearer"
    return response
