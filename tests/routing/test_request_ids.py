"""Request ids: 24 hex digits that sort by arrival, so the request log's unique index grows at
its end instead of on random pages (docs/operating.md, "Request log")."""

from __future__ import annotations

import re

import pytest

from routing.proxy import shell
from routing.proxy.shell import new_request_id

HEX24 = re.compile(r"[0-9a-f]{24}")


def test_ids_are_24_hex_digits_and_sort_by_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    arrivals = iter(range(1_765_000_000_000, 1_765_000_000_000 + 50 * 7, 7))
    monkeypatch.setattr(shell.time, "time_ns", lambda: next(arrivals) * 1_000_000)

    ids = [new_request_id() for _ in range(50)]

    assert all(HEX24.fullmatch(each) for each in ids)
    assert sorted(ids) == ids


def test_ids_in_the_same_millisecond_still_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shell.time, "time_ns", lambda: 1_765_000_000_000_000_000)

    ids = {new_request_id() for _ in range(1000)}

    assert len(ids) == 1000
