"""The context-relay strategy's handoff, pure: when an account
nears its quota, a summary of the conversation is prepared, and the next turn that lands on
another account starts from it.

* :func:`should_prepare` - whether a turn's quota reading calls for a summary;
* :func:`summary_request` - the upstream request that asks for one (in the wire format of the
  account that answered), from the conversation's recent turns;
* :func:`summary_text` - the summary out of that request's answer;
* :func:`with_handoff` - a client payload with the summary put in front of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from routing.domain.affinity.session_key import text_of
from routing.domain.config.vocabulary import WireFormat

HANDOFF_CEILING = 0.95  # at or past it the account is spent: too late to summarise on it
MAX_TURNS = 30
MAX_HISTORY_TOKENS = 8_000
CHARS_PER_TOKEN = 4
SUMMARY_MAX_TOKENS = 800
SUMMARY_TEMPERATURE = 0.1
TAG = "context_handoff"
INSTRUCTION = (
    "Summarise the conversation below for another assistant who will continue it without "
    "seeing it. Keep the user's goal, decisions made, facts established, open questions and "
    "the state of any work in progress. Write only the summary."
)

Turn = tuple[str, str]  # (role, text)


def should_prepare(percent_used: float | None, threshold: float) -> bool:
    """A summary is prepared while ``threshold <= percent_used < 0.95``."""
    return percent_used is not None and threshold <= percent_used < HANDOFF_CEILING


def conversation(payload: Mapping[str, Any]) -> list[Turn]:
    """The recent turns of a Chat Completions, Messages or Responses payload: at most
    :data:`MAX_TURNS`, the newest kept, within :data:`MAX_HISTORY_TOKENS` (about four
    characters a token)."""
    turns: list[Turn] = []
    system = payload.get("system") or payload.get("instructions")
    if system:
        text = text_of(system)
        if text:
            turns.append(("system", text))
    items = payload.get("messages")
    if items is None:
        items = payload.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("role"), str):
            text = text_of(item.get("content"))
            if text:
                turns.append((item["role"], text))
    turns = turns[-MAX_TURNS:]
    budget = MAX_HISTORY_TOKENS * CHARS_PER_TOKEN
    kept: list[Turn] = []
    for role, text in reversed(turns):
        if budget <= 0:
            break
        kept.append((role, text[-budget:]))
        budget -= len(text)
    return list(reversed(kept))


def summary_request(turns: Sequence[Turn], model: str) -> dict[str, Any]:
    """The non-streaming request that asks ``model`` for the summary: one user message, which
    Chat Completions and Messages upstreams read alike."""
    transcript = "\n\n".join(f"[{role}]\n{text}" for role, text in turns)
    user = {
        "role": "user",
        "content": f"{INSTRUCTION}\n\n<conversation>\n{transcript}\n</conversation>",
    }
    return {
        "model": model,
        "messages": [user],
        "max_tokens": SUMMARY_MAX_TOKENS,
        "temperature": SUMMARY_TEMPERATURE,
        "stream": False,
    }


def summary_text(body: Mapping[str, Any], wire_format: str) -> str | None:
    """The summary in a summary request's answer, or ``None``."""
    text: object
    if wire_format == WireFormat.ANTHROPIC:
        blocks = body.get("content")
        texts = (
            [b.get("text") for b in blocks if isinstance(b, Mapping)]
            if isinstance(blocks, list)
            else []
        )
        text = "".join(t for t in texts if isinstance(t, str))
    else:
        choices = body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else {}
        message = first.get("message") if isinstance(first, Mapping) else None
        text = message.get("content") if isinstance(message, Mapping) else None
    return text.strip() if isinstance(text, str) and text.strip() else None


def handoff_block(summary: str) -> str:
    return f"<{TAG}>\n{summary}\n</{TAG}>"


def with_handoff(payload: Mapping[str, Any], summary: str, endpoint: str) -> dict[str, Any]:
    """``payload`` with the summary in front, for the client API named ``endpoint``: the start
    of ``instructions`` (``responses``), of ``system`` (``messages``), else a first system
    message (``chat.completions``)."""
    block = handoff_block(summary)
    given = dict(payload)
    if endpoint == "responses":
        instructions = given.get("instructions")
        given["instructions"] = f"{block}\n\n{instructions}" if instructions else block
    elif endpoint == "messages":
        system = given.get("system")
        if isinstance(system, list):  # content blocks
            given["system"] = [{"type": "text", "text": block}, *system]
        else:
            given["system"] = f"{block}\n\n{system}" if system else block
    else:
        given["messages"] = [{"role": "system", "content": block}, *(given.get("messages") or [])]
    return given
