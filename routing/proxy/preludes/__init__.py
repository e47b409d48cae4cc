"""Dispatch preludes: what a fusion or pipeline combo does before the ordinary dispatch
(the strategies' "dispatch prelude" trait).

Every other strategy orders a plan's targets and dispatches the first that answers. A prelude
asks upstreams first (a fusion's panel, a pipeline's earlier stages), each through the ordinary
attempt loop with its own context, then hands back to the consumer either
:class:`Dispatch` (the judge's or the last stage's context and request, dispatched and relayed
as any request: fail-over, streaming, headers) or :class:`Answer` (an answer the gateway built
itself). The consumer runs it inside its race with the client's disconnect, so a client that
leaves cancels everything in flight.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from omniroute.core.store import StateStore
from routing.domain.client.requests import ClientRequest
from routing.domain.config.vocabulary import Strategy
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext
from routing.proxy.preludes.common import Answer, Dispatch
from routing.proxy.preludes.fusion import fusion_prelude
from routing.proxy.preludes.pipeline import pipeline_prelude

__all__ = ["Answer", "Dispatch", "Prelude", "prelude_for"]

Prelude = Callable[
    [AttemptLoop, StateStore, AttemptContext, ClientRequest], Awaitable[Dispatch | Answer]
]

_PRELUDES: dict[str, Prelude] = {
    Strategy.FUSION: fusion_prelude,
    Strategy.PIPELINE: pipeline_prelude,
}


def prelude_for(strategy: str) -> Prelude | None:
    """The prelude of a plan's strategy; ``None`` for the strategies that have none."""
    return _PRELUDES.get(strategy)
