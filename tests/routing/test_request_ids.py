"""Request ids: 24 hex digits that sort by arrival, so the request log's unique index grows at
its end instead of on random pages (docs/operating.md, "Request log")."""

from __future__ import annotations

import os
import re

import pytest

from routing.proxy import request_ids
from routing.proxy.request_ids import RandomPool, new_request_id

HEX24 = re.compile(r"[0-9a-f]{24}")


def test_ids_are_24_hex_digits_and_sort_by_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    arrivals = iter(range(1_765_000_000_000, 1_765_000_000_000 + 50 * 7, 7))
    monkeypatch.setattr(request_ids.time, "time_ns", lambda: next(arrivals) * 1_000_000)

    ids = [new_request_id() for _ in range(50)]

    assert all(HEX24.fullmatch(each) for each in ids)
    assert sorted(ids) == ids


def test_ids_in_the_same_millisecond_still_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(request_ids.time, "time_ns", lambda: 1_765_000_000_000_000_000)

    ids = {new_request_id() for _ in range(1000)}

    assert len(ids) == 1000


def test_the_pool_hands_each_piece_out_once_and_draws_again_when_empty() -> None:
    pool = RandomPool(pieces=4)

    taken = [pool.take() for _ in range(12)]  # three draws of four

    assert all(re.fullmatch(r"[0-9a-f]{12}", piece) for piece in taken)
    assert len(set(taken)) == 12


def test_a_forked_child_draws_its_own_pieces() -> None:
    pool = RandomPool(pieces=64)
    pool.take()  # the parent's pool now holds 63 pieces
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.close(reader)
        os.write(writer, "".join(pool.take() for _ in range(5)).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        in_child = pipe.read()
    os.waitpid(child, 0)

    in_parent = "".join(pool.take() for _ in range(5))

    assert len(in_child) == 60
    assert in_child != in_parent
