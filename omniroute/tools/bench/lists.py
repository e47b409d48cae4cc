"""The lists phase: the management API's paginated connection list with thousands of rows.

Needs no gateway process: a child Python process (``python -m omniroute.tools.bench.lists``)
migrates its own temporary SQLite database (a temporary ``OMNIROUTE_DATA_DIR``, the memory
state store), seeds ``Bounds.list_connections`` (5 000) connections over 20 providers through
the services (one in 20 cooling down, its row's ``rate_limited_until`` an hour ahead), a few
combos and client keys, then asks for ``GET /api/connections/?limit=50`` in-process through
Django's test client, as an operator key: the first page, a page deep in the list, a
``?search=``, a ``?provider=`` filter and the live-state filter ``?state=cooling``. The time
is the server's: from the request entering Django to the response leaving it (no network, no
client parsing), the median and the worst of ``Bounds.rounds`` rounds after one warm-up, and
the queries each request made. The bar is 50 ms for every list.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any

from omniroute.core.codepath import child_environ, python_module
from omniroute.tools.bench.report import PhaseReport

BAR_MS = 50.0
PROVIDERS = 20
COMBOS = 10
KEYS = 10
COOLING_EVERY = 20  # one connection in this many is cooling down
PAGE = "/api/connections/?limit=50"


def title(connections: int) -> str:
    return f"paginated lists, {connections} connections"


def queries(connections: int) -> dict[str, str]:
    """The lists timed, by label."""
    return {
        "first page": PAGE,
        "deep page": f"{PAGE}&offset={max(0, connections - 100)}",
        "search": f"{PAGE}&search=conn-00042",
        "provider": f"{PAGE}&provider=bench-list-07",
        "state=cooling": f"{PAGE}&state=cooling",
    }


def run(connections: int, rounds: int) -> PhaseReport:
    """Seed and time in a child process with its own temporary database; the report."""
    with tempfile.TemporaryDirectory(prefix="omniroute-bench-lists-") as data_dir:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "REDIS_URL", "OMNIROUTE_REDIS_URL")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="omniroute.settings",
            OMNIROUTE_DATA_DIR=data_dir,
            OMNIROUTE_DEBUG="1",
            OMNIROUTE_LOG_LEVEL="WARNING",
        )
        argv = [*python_module(__name__), str(connections), str(rounds)]
        environ = child_environ(env)
        done = subprocess.run(argv, env=environ, check=True, capture_output=True, text=True)
    return report(json.loads(done.stdout.strip().splitlines()[-1]), connections, rounds)


def report(figures: dict[str, dict[str, Any]], connections: int, rounds: int) -> PhaseReport:
    """The table and the verdict against the 50 ms bar (pure)."""
    lines = [
        "| list | rows matched | median ms | worst ms | queries |",
        "|---|---|---|---|---|",
    ]
    over = []
    for label, figure in figures.items():
        lines.append(
            f"| {label} | {figure['count']} | {figure['median_ms']:.1f} | "
            f"{figure['worst_ms']:.1f} | {figure['queries']} |"
        )
        if figure["median_ms"] > BAR_MS:
            over.append(label)
    summary = [
        f"{connections} connections, {rounds} rounds per list, server time in-process",
        "every list under the 50 ms bar (medians)"
        if not over
        else f"over the 50 ms bar (medians): {', '.join(over)}",
    ]
    return PhaseReport(title(connections), "\n".join(lines), tuple(summary))


# --- the child process ----------------------------------------------------------------------


def _seed(connections: int) -> str:
    """The rows, through the services; returns an operator key."""
    from django.db import transaction
    from django.utils import timezone

    from routing.domain.config.vocabulary import Scope
    from routing.models import Combo, Provider, ProviderConnection
    from routing.services import api_key_create, combo_save, connection_save, provider_save

    cooling_until = timezone.now() + timedelta(hours=1)
    with transaction.atomic():
        providers = [
            provider_save(
                provider=Provider(),
                fields={
                    "slug": f"bench-list-{index:02d}",
                    "name": f"Bench list {index:02d}",
                    "category": "api_key",
                    "base_url": "http://127.0.0.1:9/v1",
                    "wire_format": "openai",
                },
            )
            for index in range(PROVIDERS)
        ]
        for index in range(connections):
            fields: dict[str, Any] = {
                "provider": providers[index % PROVIDERS],
                "name": f"conn-{index:05d}",
                "priority": index // PROVIDERS + 1,
                "served_models": ["bench-model"],
            }
            if index % COOLING_EVERY == 0:
                fields["rate_limited_until"] = cooling_until
            connection_save(connection=ProviderConnection(), fields=fields, secret=f"sk-{index}")
        for index in range(COMBOS):
            targets = [{"provider": providers[index], "model": "bench-model"}]
            combo_save(
                combo=Combo(),
                fields={"name": f"bench-combo-{index}", "strategy": "priority"},
                targets=targets,
            )
        for index in range(KEYS):
            api_key_create(name=f"bench-client-{index}", scopes=[])
        _, plaintext = api_key_create(name="bench-operator", scopes=[Scope.MANAGE])
    return plaintext


def _time(client: Any, url: str, rounds: int) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm-up: the first request of a process pays its one-time work
    times = []
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code} {response.content[:200]!r}")
    return {
        "count": response.json()["count"],
        "median_ms": statistics.median(times),
        "worst_ms": max(times),
        "queries": len(captured),
    }


def main(connections: int, rounds: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0, interactive=False)
    key = _seed(connections)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_ACCEPT="application/json")
    figures = {label: _time(client, url, rounds) for label, url in queries(connections).items()}
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
