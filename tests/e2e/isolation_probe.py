"""A test run in miniature, started by ``tests/test_isolation.py`` as a pytest of its own (the
name keeps it out of the normal collection): a gateway and a database test write to the
databases and Redis prefixes the run made, check they are there, and report their names to
the file named by ``OMNIROUTE_PROBE_REPORT``; the caller then checks that the run removed them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection

from omniroute.core.state import get_store
from omniroute.tools.fakeupstream import FakeUpstream
from routing.models import Provider
from tests.databases import database_exists, on_database, suite_redis_url
from tests.e2e.conftest import make_route, prepare_gateway, serving


def _keys(prefix: str) -> list[bytes]:
    with redis.Redis.from_url(suite_redis_url()) as client:
        return list(client.scan_iter(match=f"{prefix}*"))


@pytest.mark.django_db
def test_a_gateway_and_a_database_test_write_to_what_the_run_made(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    Provider.objects.create(slug="probe", name="probe")  # the run's test database
    async_to_sync(get_store().set)("probe", 1)  # the run's Redis prefix
    env, manage_key = prepare_gateway(tmp_path)
    with serving(env, manage_key) as gateway:
        route = make_route(gateway, fake)
        with gateway.client(route.key) as client:
            ask = {"model": route.model(), "messages": [{"role": "user", "content": "hi"}]}
            assert client.post("/chat/completions", json=ask).status_code == 200
        gateway_prefix = env["OMNIROUTE_REDIS_PREFIX"]
        gateway_database = env["DATABASE_URL"].rsplit("/", 1)[1]
        assert _keys(gateway_prefix), "the gateway wrote nothing to Redis"
    test_database = str(connection.settings_dict["NAME"])
    server = on_database(env["DATABASE_URL"], "postgres")
    assert database_exists(server, gateway_database) and database_exists(server, test_database)
    assert _keys(settings.REDIS_PREFIX)
    report = {
        "server": server,
        "databases": [test_database, gateway_database],
        "prefixes": [settings.REDIS_PREFIX, gateway_prefix],
    }
    Path(os.environ["OMNIROUTE_PROBE_REPORT"]).write_text(json.dumps(report))
