"""The strategy registry (``routing.strategies.registry``): every combo strategy has an
orderer, or is deliberately a prelude; the declared-order strategies keep the plan."""

from __future__ import annotations

import pytest

from omniroute.core.store import MemoryStore
from routing.domain.config.snapshot import KeyInfo
from routing.domain.config.vocabulary import Strategy
from routing.domain.plan.planning import RoutePlan
from routing.proxy.context import RequestFacts
from routing.strategies.declared import keep_order
from routing.strategies.registry import ORDERERS, PRELUDES, orderer_for
from routing.strategies.request import OrderRequest

KEY = KeyInfo(1, "client", "sk-omr-x", frozenset(), (), frozenset(), True, None, None)


@pytest.mark.parametrize("strategy", list(Strategy))
def test_every_strategy_has_an_orderer_or_is_a_prelude(strategy: Strategy) -> None:
    assert (strategy in ORDERERS) != (strategy in PRELUDES)


def test_the_declared_order_strategies_keep_the_order() -> None:
    declared = {Strategy.PRIORITY, Strategy.FILL_FIRST, Strategy.CONTEXT_RELAY}
    assert {s for s, orderer in ORDERERS.items() if orderer is keep_order} == declared


@pytest.mark.parametrize("name", ["fusion", "pipeline", "no-such-strategy"])
def test_a_prelude_or_an_unknown_name_has_no_orderer(name: str) -> None:
    assert orderer_for(name) is None


def test_a_name_finds_its_orderer() -> None:
    assert orderer_for("priority") is keep_order


async def test_keeping_the_order_changes_nothing() -> None:
    plan = RoutePlan("team", "priority", (), "team")
    request = OrderRequest(plan, RequestFacts("r1", KEY, False))
    assert await keep_order(request, MemoryStore()) is None
