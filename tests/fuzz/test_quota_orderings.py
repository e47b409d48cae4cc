"""Quota snapshots from arbitrary rate-limit headers and stored records, and the orderings that
rank by them (reset-aware, reset-window, headroom), quota-share and cache affinity: never an
exception, fractions within 0..1, every ordering a permutation of its targets."""

from __future__ import annotations

import math
import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from routing.domain.plan.planning import Target
from routing.domain.quota.snapshots import QuotaSnapshot, QuotaWindow, snapshot_from_headers
from routing.strategies.cache import prompt_cache_key, rendezvous, target_identity
from routing.strategies.keys import execution_key
from routing.strategies.quota.reset import ResetAwareConfig, headroom, reset_aware, reset_window
from routing.strategies.quota_share.drr import QuotaShareState, select_quota_share_target
from tests.fuzz.conftest import counted
from tests.fuzz.strategies import NOW, any_json, finite_or_odd_floats, targets
from tests.fuzz.test_orderings import assert_permutation

pytestmark = pytest.mark.fuzz

_FIELDS = ("limit", "remaining", "reset", "utilization", "status")
_NAMES = st.one_of(
    st.builds(
        "x-ratelimit-{}-{}".format,
        st.sampled_from(["limit", "remaining", "reset"]),
        st.sampled_from(["requests", "tokens"]),
    ),
    st.builds(
        "anthropic-ratelimit-{}-{}".format,
        st.sampled_from(["requests", "tokens", "input-tokens", "output-tokens"]),
        st.sampled_from(["limit", "remaining", "reset"]),
    ),
    st.builds(
        "anthropic-ratelimit-unified-{}-{}".format,
        st.sampled_from(["5h", "7d"]),
        st.sampled_from(["utilization", "reset"]),
    ),
    st.just("anthropic-ratelimit-unified-status"),
    st.text(max_size=12),
)
_VALUES = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats().map(repr),
    st.sampled_from(["1s", "6m0s", "20ms", "1h2m3.5s", "rejected", "allowed", "0", "", "9" * 400]),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.text(max_size=16),
)
RATE_HEADERS = st.dictionaries(_NAMES, _VALUES, max_size=8)
WINDOW = st.builds(QuotaWindow, finite_or_odd_floats(), finite_or_odd_floats())
SNAPSHOT = st.one_of(
    st.none(),
    st.builds(
        QuotaSnapshot,
        percent_used=finite_or_odd_floats(),
        reset_at=finite_or_odd_floats(),
        limit_reached=st.booleans(),
        windows=st.dictionaries(
            st.sampled_from(["session", "weekly", "monthly", "requests", "tokens"]), WINDOW
        ),
        taken_at=NOW,
    ),
)


def fraction(value: float | None) -> bool:
    return value is None or 0.0 <= value <= 1.0


@given(RATE_HEADERS, NOW)
@counted
def test_snapshot_from_headers(headers: dict[str, str], now: float) -> None:
    snapshot = snapshot_from_headers(headers, now)
    if snapshot is None:
        return

    assert fraction(snapshot.percent_used)
    assert all(fraction(w.percent_used) for w in snapshot.windows.values())
    resets = [snapshot.reset_at, *(w.reset_at for w in snapshot.windows.values())]
    assert all(r is None or (math.isfinite(r) and r >= now) for r in resets)  # past: left out
    assert QuotaSnapshot.from_record(orjson.loads(orjson.dumps(snapshot.to_record()))) == snapshot


@given(any_json())
@counted
def test_snapshot_from_record(record: Any) -> None:
    snapshot = QuotaSnapshot.from_record(record)

    assert snapshot is None or fraction(snapshot.percent_used)


@given(
    targets(),
    st.lists(SNAPSHOT, min_size=8, max_size=8),
    NOW,
    st.integers(min_value=-(10**9), max_value=10**9),
    st.builds(ResetAwareConfig, *[finite_or_odd_floats().map(lambda v: v or 0.0)] * 4),
)
@counted
def test_quota_orderings(
    found: tuple[Target, ...],
    snapshots: list[QuotaSnapshot | None],
    now: float,
    counter: int,
    config: ResetAwareConfig,
) -> None:
    lookup = {t: snapshots[i] for i, t in enumerate(found)}.__getitem__
    for ordered in (
        reset_aware(found, lookup, now, config, counter),
        reset_window(found, lookup, now, ("session", "weekly"), 60_000, counter),
        headroom(found, lookup),
    ):
        assert_permutation(ordered, found)


@given(
    targets(),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=8, max_size=8),
    st.sets(st.integers(min_value=1, max_value=12)),
    st.dictionaries(
        st.integers(min_value=1, max_value=12),
        st.one_of(st.none(), st.integers(min_value=-1, max_value=3)),
    ),
    st.integers(min_value=1, max_value=20),
)
@counted
def test_quota_share(
    found: tuple[Target, ...],
    weights: list[float],
    saturated: set[int],
    caps: dict[int, int | None],
    requests: int,
) -> None:
    state, in_use = QuotaShareState(), []
    for i in range(requests):
        chosen = select_quota_share_target(
            found,
            combo="c",
            model="m1",
            now=1000.0 + i,
            state=state,
            weights=weights[: len(found)],
            saturated=saturated,
            caps=caps,
        )
        assert_permutation(chosen.ordered, found)
        assert chosen.target == (chosen.ordered[0] if found else None)
        in_use.append(chosen.slot)
    for slot in in_use:
        if slot is not None:
            slot.release()
    assert all(state.in_flight(t.connection.id, 1000.0 + requests) == 0 for t in found)


_PAYLOAD = st.dictionaries(
    st.sampled_from(
        ["prompt_cache_key", "metadata", "system", "instructions", "messages", "input", "model"]
    ),
    any_json(),
).map(lambda payload: orjson.loads(orjson.dumps(payload)))  # as the gateway parses a body


@given(_PAYLOAD, targets(), st.randoms(use_true_random=False))
@counted
def test_cache_affinity(
    payload: dict[str, Any], found: tuple[Target, ...], rng: random.Random
) -> None:
    key = prompt_cache_key(payload)

    assert key is None or (isinstance(key, str) and 0 < len(key) <= 4096)
    if key is None:
        return
    identity = {t: target_identity(t, found) for t in found}
    ordered = rendezvous(found, key, identity.__getitem__)
    assert_permutation(ordered, found)
    assert len(set(identity.values())) == len(found)  # one identity per target
    mixed = list(found)
    rng.shuffle(mixed)  # the declared order does not move the rendezvous order
    assert rendezvous(mixed, key, identity.__getitem__) == ordered
    assert {execution_key(t) for t in ordered} == {execution_key(t) for t in found}
