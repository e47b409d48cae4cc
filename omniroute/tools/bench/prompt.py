"""The prompt phase: non-streaming requests whose one message carries ~1 MB of text, and
requests carrying a coding agent's conversation.

The gateway's body limit (``OMNIROUTE_MAX_BODY_BYTES``, 10 MiB by default) admits it as is;
the fake upstream (aiohttp) reads bodies up to 1 MiB, so the default size, 1,000,000 bytes of
content plus the JSON around it, fits both. The conversation is ``CONVERSATION_TURNS`` turns of
a user's text, an assistant's tool call and the tool's result (600 messages, about 150 kB): a
body the gateway walks message by message (its nesting, its prompt text), where the large
prompt is one string. Six targets at concurrency 1, alternating, each row the median of
``Bounds.rounds`` runs: ``direct`` and ``gateway`` with a two-letter prompt, ``direct-1MB`` and
``gateway-1MB`` with the large one, ``direct-conversation`` and ``gateway-conversation``.
"""

from __future__ import annotations

from omniroute.tools.bench.harness import SHORT_PROMPT, Bench
from omniroute.tools.bench.report import PhaseReport, median_run, prompt_line, table
from omniroute.tools.loadgen import RunResult

SENTENCE = "The gateway relays this sentence to the fake upstream, byte for byte. "
LEVEL = 1
CONVERSATION_TURNS = 200


def title(size: int) -> str:
    return f"{size_label(size)} prompt, {3 * CONVERSATION_TURNS}-message conversation"


def size_label(size: int) -> str:
    """``1_000_000`` as ``1 MB``, ``250_000`` as ``250 kB`` (decimal units)."""
    return f"{size / 1e6:g} MB" if size >= 1_000_000 else f"{size / 1e3:g} kB"


def prompt_text(size: int) -> str:
    """``size`` characters of plain ASCII prose (so ``size`` bytes of JSON string)."""
    repeats = size // len(SENTENCE) + 1
    return (SENTENCE * repeats)[:size]


def conversation(turns: int) -> list[dict[str, object]]:
    """A coding agent's conversation: per turn, a user's text part, an assistant's tool call
    and the tool's result."""
    messages: list[dict[str, object]] = []
    for turn in range(turns):
        call = {"name": "read_file", "arguments": f'{{"path": "src/module_{turn}.py"}}'}
        messages += [
            {"role": "user", "content": [{"type": "text", "text": prompt_text(200)}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call_{turn}", "type": "function", "function": call}],
            },
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": prompt_text(300)},
        ]
    return messages


async def run(bench: Bench) -> PhaseReport:
    size = bench.bounds.prompt_bytes
    big = size_label(size).replace(" ", "")
    short: list[dict[str, object]] = [{"role": "user", "content": SHORT_PROMPT}]
    large: list[dict[str, object]] = [{"role": "user", "content": prompt_text(size)}]
    agent = conversation(CONVERSATION_TURNS)
    cases = {
        "direct": (bench.direct(), short),
        "gateway": (bench.through("mock/demo-model"), short),
        f"direct-{big}": (bench.direct(), large),
        f"gateway-{big}": (bench.through("mock/demo-model"), large),
        "direct-conversation": (bench.direct(), agent),
        "gateway-conversation": (bench.through("mock/demo-model"), agent),
    }
    runs: dict[str, list[RunResult]] = {label: [] for label in cases}
    for _ in range(bench.bounds.rounds):
        for label, (target, messages) in cases.items():
            runs[label].append(
                await bench.measure(
                    label, target, stream=False, concurrency=LEVEL, messages=messages
                )
            )
    rows = [median_run(found) for found in runs.values()]
    small = (rows[0], rows[1])
    lines = (prompt_line(small, (rows[2], rows[3])), prompt_line(small, (rows[4], rows[5])))
    return PhaseReport(title(size), table(rows), lines)
