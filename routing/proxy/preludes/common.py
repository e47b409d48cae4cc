"""What the dispatch preludes share: their results, the contexts of their asks, and the
reading of a plain answer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import orjson

from routing.domain.client.conversations import Conversation, conversation_for
from routing.domain.client.errors import GatewayError
from routing.domain.client.requests import ClientRequest
from routing.domain.client.usage import NO_TOKENS, Tokens
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, LoopState
from routing.proxy.relay import Headers
from routing.proxy.seams import AttemptResult


@dataclass(frozen=True, slots=True)
class Dispatch:
    """What the consumer dispatches and relays as any request: the judge's or the last
    stage's context (its plan narrowed to their targets) and request."""

    context: AttemptContext
    request: ClientRequest


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer the gateway built itself: a panel's only answer, or a failure (``error``:
    an OpenAI-style body the consumer renders in the client API's error shape)."""

    status: int
    body: bytes
    headers: Headers
    error: bool = False
    tokens: Tokens = NO_TOKENS  # as the answer's usage reported them


@dataclass(frozen=True, slots=True)
class Reading:
    """A plain answer as the preludes read it: its bytes, its JSON and its text."""

    raw: bytes
    answer: dict[str, Any]
    text: str | None


def conversation_of(context: AttemptContext, request: ClientRequest) -> Conversation:
    """The client API's conversation shape; a 400 for what a prelude cannot ask several
    upstreams about (a Responses request continuing a stored response lives at one account)."""
    strategy = context.plan.strategy
    if request.previous_response_id is not None:
        raise GatewayError(
            400,
            "unsupported_for_strategy",
            f"A '{strategy}' combo cannot continue a stored response (previous_response_id): "
            "that conversation lives at one upstream account. Send the whole conversation as "
            "'input' instead.",
        )
    conversation = conversation_for(context.facts.endpoint.name)
    if conversation is None:
        raise GatewayError(
            400,
            "unsupported_for_strategy",
            f"A '{strategy}' combo cannot serve the {context.facts.endpoint.name} API.",
        )
    return conversation


def derived(context: AttemptContext, targets: tuple[Target, ...], suffix: str) -> AttemptContext:
    """The context of one draft ask (a panel member, an earlier stage): the request's plan
    narrowed to ``targets``, not streamed, no tools; its deadline, start, decision notes and
    end-of-request callbacks are the request's. Its own id keeps its admission holds apart
    from its siblings' running at the same time."""
    facts = replace(
        context.facts,
        request_id=f"{context.facts.request_id}{suffix}",
        stream=False,
        tools=0,
        pinned=False,
    )
    return AttemptContext(
        facts,
        replace(context.plan, targets=targets),
        LoopState(deadline_at=context.loop.deadline_at),
        on_finish=context.on_finish,
        notes=context.notes,
    )


async def read_reply(result: AttemptResult, conversation: Conversation) -> Reading:
    """The winning plain reply of a draft ask, read and closed."""
    reply = result.reply
    assert reply is not None and reply.stream is None  # a draft is never streamed
    try:
        answer = orjson.loads(reply.body)  # a JSON object: the upstream client checked it
    finally:
        await reply.aclose()
    return Reading(reply.body, answer, conversation.answer_text(answer))


def failure_reason(context: AttemptContext) -> str:
    """Why an ask got no answer, in a few words, for the client's error message."""
    outcome = context.loop.last_outcome
    if outcome is not None:
        return outcome.detail or outcome.kind.value
    if context.loop.exclusions:
        return "skipped (" + ", ".join(sorted({e.reason for e in context.loop.exclusions})) + ")"
    if context.loop.deadline_hit:
        return "the request's deadline ran out"
    return "no eligible target"
