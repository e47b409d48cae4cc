"""An attempt's own gate caps are worked out once per snapshot and target
(``routing.proxy.guards.admission.gate_caps``, a ``routing.proxy.snapshot_memo.TargetMemo``): a
new snapshot's caps are its own."""

from __future__ import annotations

from dataclasses import replace

from resilience.domain.request_queue import RequestQueueSettings
from routing.domain.config.snapshot import ConfigSnapshot
from routing.proxy.guards.admission import GLOBAL_GATE, connection_gate, gate_caps
from tests.routing.auto_support import ALPHA, target


def snapshot(global_cap: int) -> ConfigSnapshot:
    queue = RequestQueueSettings(global_concurrent_requests=global_cap)
    return ConfigSnapshot(providers={"alpha": ALPHA}, request_queue=queue)


def test_a_snapshot_keeps_a_targets_caps_and_a_new_snapshot_has_its_own() -> None:
    capped, uncapped = target(1, max_concurrent=2), target(2)
    first = snapshot(global_cap=0)

    assert gate_caps(capped, first) == {connection_gate(1): 2}
    assert gate_caps(capped, first) is gate_caps(capped, first)
    assert gate_caps(uncapped, first) == {}
    assert gate_caps(uncapped, snapshot(global_cap=5)) == {GLOBAL_GATE: 5}
    assert gate_caps(capped, replace(first)) == {connection_gate(1): 2}


def test_an_equal_target_built_again_is_looked_up_afresh() -> None:
    first = snapshot(global_cap=0)
    assert gate_caps(target(1, max_concurrent=2), first) == {connection_gate(1): 2}
    assert gate_caps(target(1, max_concurrent=3), first) == {connection_gate(1): 3}


def test_the_caps_kept_for_one_snapshot_are_bounded() -> None:
    first = snapshot(global_cap=0)
    targets = [target(index) for index in range(gate_caps.bound + 5)]

    for each in targets:
        gate_caps(each, first)

    assert 0 < len(gate_caps) <= gate_caps.bound
