"""A serving process's garbage collector (omniroute/collector.py): what it allocated while
starting is frozen out of collections, and the young generation is collected every
``OMNIROUTE_GC_GEN0_THRESHOLD`` allocations; both servers tune it once the application is
loaded."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from omniroute import uvicorn_server
from omniroute.collector import tune_collector
from omniroute.shutdown import GatewayServer

pytestmark = pytest.mark.usefixtures("collector_restored")


async def _idle(scope: Any, receive: Any, send: Any) -> None:
    """An application daphne never starts here."""


def test_tuning_freezes_what_exists_and_sets_the_young_generation_threshold() -> None:
    gc.unfreeze()
    _, gen1, gen2 = gc.get_threshold()

    tune_collector(12_345)

    assert gc.get_threshold() == (12_345, gen1, gen2)  # the older generations keep theirs
    assert gc.get_freeze_count() > 0


def test_the_daphne_server_tunes_the_collector_with_the_setting(settings: Settings) -> None:
    gc.unfreeze()
    settings.GC_GEN0_THRESHOLD = 23_456

    GatewayServer(_idle, endpoints=["tcp:0"])

    assert gc.get_threshold()[0] == 23_456
    assert gc.get_freeze_count() > 0


def test_the_uvicorn_server_tunes_the_collector_with_the_setting(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.unfreeze()
    settings.GC_GEN0_THRESHOLD = 34_567
    served: list[Any] = []
    monkeypatch.setattr(
        uvicorn_server.CleanlyStoppingServer, "run", lambda self, **kw: served.append(self)
    )

    uvicorn_server.main(["--port", "0"])

    assert served and gc.get_threshold()[0] == 34_567
    assert gc.get_freeze_count() > 0
