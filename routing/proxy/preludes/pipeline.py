"""The pipeline strategy's prelude.

The stages are the combo's steps in order, each with its targets (in the plan's order) as its
own fail-over list. Every stage but the last is asked through the ordinary attempt loop, not
streamed and without tools; each stage after the first gets the client's request plus two turns:
the previous stage's answer as an assistant turn, then a user turn asking to review and improve
it (``routing.strategies.fusion.REVIEW_PROMPT``). Only the last stage's answer reaches the client:
it is dispatched and relayed as any request, with the client's stream flag and tools.

* A one-step pipeline is an ordinary request to its one step.
* A request declaring tools the model may call goes to the last stage only (an earlier stage
  would answer with a tool call the gateway cannot run).
* An earlier stage that fails on every one of its targets ends the request with its error, as
  the gateway renders any request's failure; one that answers without text ends it with 502
  ``pipeline_stage_empty``.

``X-OmniRoute-Decision`` adds ``stages=<the stages run>`` (``1,2,3``) and, when an earlier
stage ended the request, ``failed_stage=<n>``; ``bypass=tools`` when tools skipped them.
"""

from __future__ import annotations

from dataclasses import replace

from omniroute.core.store import StateStore
from routing.domain.client.errors import error_body
from routing.domain.client.requests import ClientRequest
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext
from routing.proxy.preludes.common import Answer, Dispatch, conversation_of, derived, read_reply
from routing.proxy.relay import JSON, decision_header, failure_response
from routing.strategies import fusion

STAGE_EMPTY = "pipeline_stage_empty"


async def pipeline_prelude(
    loop: AttemptLoop, store: StateStore, context: AttemptContext, request: ClientRequest
) -> Dispatch | Answer:
    """Run every stage but the last; hand back the last stage's dispatch, or the error of the
    stage that ended the request."""
    stages = fusion.groups(context.plan.targets)
    last = len(stages)
    if last > 1 and fusion.bears_tools(request.payload):
        context.notes += [f"stages={last}", "bypass=tools"]
        context.plan = replace(context.plan, targets=stages[-1])
        return Dispatch(context, request)
    if last < 2:  # one stage: an ordinary request
        context.notes.append(_run(last))
        return Dispatch(context, request)
    conversation = conversation_of(context, request)  # after the bypasses: an ordinary request
    previous: str | None = None
    for number, targets in enumerate(stages[:-1], start=1):
        stage = derived(context, targets, f".stage{number}")
        payload = fusion.stage_payload(conversation, request.payload, previous)
        result = await loop.run(stage, fusion.draft_payload(payload))
        if result.reply is None:
            context.notes += [_run(number), f"failed_stage={number}"]
            status, body, headers = failure_response(stage)
            return Answer(status, body, headers, error=True)
        previous = (await read_reply(result, conversation)).text
        if not previous:
            context.notes += [_run(number), f"failed_stage={number}"]
            return _stage_empty(stage, number)
    context.notes.append(_run(last))
    context.plan = replace(context.plan, targets=stages[-1])
    payload = fusion.stage_payload(conversation, request.payload, previous)
    return Dispatch(context, replace(request, payload=payload))


def _run(through: int) -> str:
    return "stages=" + ",".join(str(n) for n in range(1, through + 1))


def _stage_empty(stage: AttemptContext, number: int) -> Answer:
    """502: an earlier stage answered, but without text to hand to the next one."""
    target = stage.loop.attempts[-1][0] if stage.loop.attempts else None
    named = f" ({target.label})" if target is not None else ""
    message = (
        f"Pipeline stage {number}{named} answered without text: there is nothing to hand "
        f"to stage {number + 1}."
    )
    body = error_body(message, "upstream_error", STAGE_EMPTY)
    headers = [(b"content-type", JSON), (b"x-omniroute-decision", decision_header(stage, target))]
    return Answer(502, body, headers, error=True)
