"""The prompt phase: non-streaming requests whose one message carries ~1 MB of text.

The gateway's body limit (``OMNIROUTE_MAX_BODY_BYTES``, 10 MiB by default) admits it as is;
the fake upstream (aiohttp) reads bodies up to 1 MiB, so the default size, 1,000,000 bytes of
content plus the JSON around it, fits both. Four targets at concurrency 1, alternating, each
row the median of ``Bounds.rounds`` runs: ``direct`` and ``gateway`` with a two-letter prompt,
``direct-1MB`` and ``gateway-1MB`` with the large one.
"""

from __future__ import annotations

from omniroute.tools.bench.harness import SHORT_PROMPT, Bench
from omniroute.tools.bench.report import PhaseReport, median_run, prompt_line, table
from omniroute.tools.loadgen import RunResult

SENTENCE = "The gateway relays this sentence to the fake upstream, byte for byte. "
LEVEL = 1


def title(size: int) -> str:
    return f"{size_label(size)} prompt"


def size_label(size: int) -> str:
    """``1_000_000`` as ``1 MB``, ``250_000`` as ``250 kB`` (decimal units)."""
    return f"{size / 1e6:g} MB" if size >= 1_000_000 else f"{size / 1e3:g} kB"


def prompt_text(size: int) -> str:
    """``size`` characters of plain ASCII prose (so ``size`` bytes of JSON string)."""
    repeats = size // len(SENTENCE) + 1
    return (SENTENCE * repeats)[:size]


async def run(bench: Bench) -> PhaseReport:
    size = bench.bounds.prompt_bytes
    big = size_label(size).replace(" ", "")
    cases = {
        "direct": (bench.direct(), SHORT_PROMPT),
        "gateway": (bench.through("mock/demo-model"), SHORT_PROMPT),
        f"direct-{big}": (bench.direct(), prompt_text(size)),
        f"gateway-{big}": (bench.through("mock/demo-model"), prompt_text(size)),
    }
    runs: dict[str, list[RunResult]] = {label: [] for label in cases}
    for _ in range(bench.bounds.rounds):
        for label, (target, content) in cases.items():
            runs[label].append(
                await bench.measure(label, target, stream=False, concurrency=LEVEL, content=content)
            )
    rows = [median_run(found) for found in runs.values()]
    line = prompt_line((rows[0], rows[1]), (rows[2], rows[3]))
    return PhaseReport(title(size), table(rows), (line,))
