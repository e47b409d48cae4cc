"""The fusion strategy's prelude.

The panel is the combo's steps, each with its targets (in the plan's order) as its own
fail-over list. Per request:

* a request declaring tools the model may call skips the panel: it goes, as an ordinary
  request, to the judge (the panel's first member unless ``judgeModel`` names another model);
  so does every request of a one-member panel (to that member);
* otherwise every member is asked the request, not streamed and without tools
  (``routing.proxy.preludes.panel``); then
  - no answer: 503 ``fusion_panel_failed``, naming each member and why it failed;
  - one answer: returned as it is (replayed as a short stream in the client API's own events
    when the client asked for a stream);
  - two or more: the judge is dispatched and relayed as any request (its fail-over, its
    stream, its headers), with the answers as "Source 1".."Source N" and the client's own
    stream flag and tools.

``X-OmniRoute-Decision`` adds ``panel=<members>`` and ``answered=<answers>`` (or
``bypass=tools``). The judge is resolved before the panel is asked: a judge the request cannot
use costs no upstream call.
"""

from __future__ import annotations

from dataclasses import replace

from omniroute.core.store import StateStore
from routing.domain.client.errors import error_body
from routing.domain.client.requests import ClientRequest
from routing.domain.client.usage import answer_tokens
from routing.domain.plan.planning import Target, plan_route
from routing.domain.streams.answer import answer_as_stream
from routing.proxy.attempts import AttemptLoop
from routing.proxy.context import AttemptContext
from routing.proxy.preludes.common import Answer, Dispatch, conversation_of, derived
from routing.proxy.preludes.panel import Ask, PanelTimes, ask_panel
from routing.proxy.relay import JSON, WARNING_HEADER, decision_header, with_warnings
from routing.proxy.response_pins import remember, response_id
from routing.strategies import fusion

PANEL_FAILED = "fusion_panel_failed"
fusion_settings = fusion.fusion_settings  # the one read of the combo's fusion options


async def fusion_prelude(
    loop: AttemptLoop, store: StateStore, context: AttemptContext, request: ClientRequest
) -> Dispatch | Answer:
    """Ask the panel, then hand back the judge's dispatch, the only answer, or a 503."""
    settings = fusion_settings(context.facts.snapshot.combos.get(context.plan.combo or ""))
    panel = fusion.groups(context.plan.targets)
    judge = _judge_targets(context, panel, settings)
    context.notes.append(f"panel={len(panel)}")
    if len(panel) < 2:
        return Dispatch(context, request)
    if fusion.bears_tools(request.payload):
        context.notes.append("bypass=tools")
        context.plan = replace(context.plan, targets=judge)
        return Dispatch(context, request)
    conversation = conversation_of(context, request)  # after the bypasses: an ordinary request
    asks = [Ask(derived(context, targets, f".panel{n}")) for n, targets in enumerate(panel, 1)]
    await ask_panel(
        loop,
        asks,
        fusion.draft_payload(request.payload),
        conversation,
        _times(settings, len(panel), context.loop.remaining()),
    )
    answered = [ask for ask in asks if ask.text is not None]
    context.notes.append(f"answered={len(answered)}")
    if not answered:
        return _panel_failed(context, asks)
    if len(answered) == 1:
        return await _as_is(store, answered[0], request)
    texts = [ask.text for ask in answered if ask.text is not None]
    context.plan = replace(context.plan, targets=judge)
    payload = fusion.judge_payload(conversation, request.payload, texts)
    return Dispatch(context, replace(request, payload=payload))


def _judge_targets(
    context: AttemptContext, panel: tuple[tuple[Target, ...], ...], settings: fusion.FusionSettings
) -> tuple[Target, ...]:
    """The judge's fail-over list: the panel member serving ``judgeModel`` (by default the
    first member), else that model planned as a request of its own would be."""
    model = settings.judge_model
    if model is None:
        return panel[0]
    for member in panel:
        if member[0].label == model:
            return member
    plan = plan_route(
        context.facts.snapshot, model, context.facts.key, context.facts.endpoint.wire_format
    )
    return plan.targets


def _times(settings: fusion.FusionSettings, size: int, remaining: float) -> PanelTimes:
    limit = min(settings.panel_hard_timeout_ms / 1000, max(0.0, remaining))
    return PanelTimes(settings.quorum(size), settings.straggler_grace_ms / 1000, limit)


def _panel_failed(context: AttemptContext, asks: list[Ask]) -> Answer:
    """503: no member answered; each one named with why."""
    reasons = "; ".join(f"{ask.label}: {ask.failure}" for ask in asks)
    message = f"Every member of the fusion panel failed ({len(asks)} of {len(asks)}): {reasons}."
    panel = [{"model": ask.label, "reason": ask.failure} for ask in asks]
    body = error_body(message, "service_unavailable", PANEL_FAILED, diagnostics={"panel": panel})
    headers = [(b"content-type", JSON), (b"x-omniroute-decision", decision_header(context, None))]
    return Answer(503, body, headers, error=True)


async def _as_is(store: StateStore, ask: Ask, request: ClientRequest) -> Answer:
    """The panel's only answer, as the member gave it (a stream of it, for a stream)."""
    member, target, reading = ask.context, ask.target, ask.reading
    assert target is not None and reading is not None and reading.text is not None
    if member.facts.endpoint.pins_responses:  # a later request may continue from it
        answer_id = response_id(reading.raw)
        if answer_id:
            await remember(store, answer_id, target.connection.id)
    headers = [(b"x-omniroute-decision", decision_header(member, target))]
    headers += [(WARNING_HEADER, text.encode()) for text in request.warnings]
    tokens = answer_tokens(reading.answer)
    if request.stream:  # warnings in headers only, as for a relayed stream
        answer = reading.answer
        if request.hides_usage:  # the client did not ask for the usage block
            answer = {name: value for name, value in answer.items() if name != "usage"}
        body = answer_as_stream(member.facts.endpoint.name, answer, reading.text)
        headers += [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        return Answer(200, body, headers, tokens=tokens)
    body = with_warnings(reading.raw, request.warnings)
    headers += [(b"content-type", JSON), (b"content-length", str(len(body)).encode())]
    return Answer(200, body, headers, tokens=tokens)
