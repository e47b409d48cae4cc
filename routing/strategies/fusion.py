"""The fusion and pipeline strategies' pure parts.

A fusion combo asks every step of the combo (its *panel*) the same question in parallel, then a
*judge* model writes one answer from theirs; a pipeline combo asks its steps one after another,
each stage reviewing the previous stage's answer. This module decides the settings, groups a
plan's targets into panel members or stages, and builds the requests they are sent:

* a *draft* (a panel member's request, an earlier pipeline stage's) is never streamed and
  carries no tools: the gateway cannot run a tool call between two upstreams;
* the judge gets the client's request (its stream flag, its tools) with one more user turn
  holding the panel's answers as "Source 1".."Source N": no provider, model or connection is
  named, so the judge weighs the answers, not their authors;
* pipeline stage k+1 gets the client's request with two more turns: stage k's answer as an
  assistant turn, then a user turn asking to review and improve it (:data:`REVIEW_PROMPT`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from routing.domain.client.conversations import Conversation, Payload
from routing.domain.config.snapshot import ComboInfo
from routing.domain.plan.planning import Target

DEFAULT_MIN_PANEL = 2
DEFAULT_STRAGGLER_GRACE_MS = 8_000
DEFAULT_PANEL_HARD_TIMEOUT_MS = 90_000

# Fields a draft leaves out: tools, and what only makes sense with tools or a stream.
DRAFT_DROPS = frozenset({"tools", "tool_choice", "parallel_tool_calls", "stream_options"})

JUDGE_INTRO = (
    "Several independent assistants answered the conversation above. Their answers follow, "
    "labelled Source 1 to Source {count}."
)
JUDGE_TASK = (
    "Write the single best reply to the conversation above. Combine what the sources got "
    "right, correct what they got wrong, and leave out claims that only one source makes "
    "without support. Reply as the assistant, directly to the user: do not mention the "
    "sources, this review, or that several answers existed."
)
REVIEW_PROMPT = (
    "Review the answer above as an expert editor: correct any mistakes, fill in what is "
    "missing and make it clearer. Reply with the complete improved answer only, addressed to "
    "the user, without commenting on the changes."
)


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """A fusion combo's settings (its options ``judgeModel``, ``minPanel``,
    ``stragglerGraceMs``, ``panelHardTimeoutMs``)."""

    judge_model: str | None = None  # ``provider/model``; ``None``: the first panel member's
    min_panel: int = DEFAULT_MIN_PANEL
    straggler_grace_ms: int = DEFAULT_STRAGGLER_GRACE_MS
    panel_hard_timeout_ms: int = DEFAULT_PANEL_HARD_TIMEOUT_MS

    def quorum(self, panel_size: int) -> int:
        """How many answers end the wait for the panel (but the stragglers' grace):
        ``minPanel`` clamped to [2, panel size]."""
        return min(max(2, self.min_panel), panel_size)


def fusion_settings(combo: ComboInfo | None) -> FusionSettings:
    """The fusion settings of ``combo``, from its options (the defaults without a combo)."""
    if combo is None:
        return FusionSettings()
    options = combo.options
    return FusionSettings(
        options.judge_model or None,
        options.min_panel,
        options.straggler_grace_ms,
        options.panel_hard_timeout_ms,
    )


def groups(targets: Sequence[Target]) -> tuple[tuple[Target, ...], ...]:
    """A plan's targets grouped by combo step, in the plan's order: the fusion panel's members,
    or the pipeline's stages, each with its targets as its own fail-over list."""
    by_step: dict[int, list[Target]] = {}
    for target in targets:
        by_step.setdefault(target.step, []).append(target)
    return tuple(tuple(members) for members in by_step.values())


def bears_tools(payload: Payload) -> bool:
    """Whether a request declares tools the model may call (non-empty ``tools`` and a
    ``tool_choice`` other than none): such a request skips the panel or the earlier stages."""
    tools = payload.get("tools")
    if not isinstance(tools, list) or not tools:
        return False
    choice: Any = payload.get("tool_choice")
    if isinstance(choice, dict):  # Anthropic's {"type": "none"}
        choice = choice.get("type")
    return bool(choice != "none")


def draft_payload(payload: Payload) -> Payload:
    """The request for a panel member or an earlier pipeline stage: not streamed, no tools."""
    kept = {name: value for name, value in payload.items() if name not in DRAFT_DROPS}
    return {**kept, "stream": False}


def judge_prompt(answers: Sequence[str]) -> str:
    """The judge's instruction with the panel's answers, anonymised as "Source N"."""
    sources = [f"--- Source {n} ---\n{text.strip()}" for n, text in enumerate(answers, start=1)]
    parts = [JUDGE_INTRO.format(count=len(answers)), *sources, "--- End of sources ---"]
    return "\n\n".join([*parts, JUDGE_TASK])


def judge_payload(conversation: Conversation, payload: Payload, answers: Sequence[str]) -> Payload:
    """The judge's request: the client's, with the panel's answers as one more user turn."""
    return conversation.with_turns(payload, [("user", judge_prompt(answers))])


def stage_payload(conversation: Conversation, payload: Payload, previous: str | None) -> Payload:
    """A pipeline stage's request: the client's, with the previous stage's answer as an
    assistant turn and a user turn asking to review and improve it (the first stage: as is)."""
    if previous is None:
        return payload
    return conversation.with_turns(payload, [("assistant", previous), ("user", REVIEW_PROMPT)])
