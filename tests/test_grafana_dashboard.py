"""The Grafana dashboard in docs/ reads only families ``/metrics`` exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from omniroute.core.observability.metrics import ADMISSION_WAIT_SECONDS, COUNTED

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana-dashboard.json"
SCRAPED = {  # the gauges read at scrape time (routing.metrics, resilience.metrics)
    "omniroute_breaker_state",
    "omniroute_provider_connections",
    "omniroute_provider_locked_models",
    "omniroute_leases_active",
    "omniroute_queue_depth",
}
SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def test_every_metric_the_dashboard_queries_is_exposed() -> None:
    counted = {metric._name for metric in (*COUNTED, ADMISSION_WAIT_SECONDS)}
    panels = json.loads(DASHBOARD.read_text())["panels"]
    queried = {
        name
        for panel in panels
        for query in panel["targets"]
        for name in re.findall(r"omniroute_[a-z_]+", query["expr"])
    }
    assert queried
    for name in queried:
        base = next((name.removesuffix(s) for s in SUFFIXES if name.endswith(s)), name)
        assert base in counted | SCRAPED, name
