"""A CPU profile's summary, from py-spy's collapsed stacks (pure).

``py-spy record --format raw`` writes one line per distinct stack: the frames from the outermost
to the innermost, separated by ``;``, then a space and how many samples ended in that stack. A
frame reads ``function (path/to/file.py:line)``. The summary counts each frame once per sample
(*inclusive*: the sample was inside it) and the innermost frame alone (*self*: the sample was in
its own code), with line numbers dropped so a function is one row however many lines it spans.
Inclusive rows are the product's own frames (``PRODUCT``); self rows are any code, so the
framework's and the standard library's share shows beside the gateway's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

PRODUCT = ("omniroute/", "routing/", "resilience/", "leases/")
_LINE = re.compile(r":\d+\)$")


@dataclass(frozen=True, slots=True)
class Profile:
    """Sample counts: in all, per frame inclusive, per frame self."""

    samples: int
    inclusive: Counter[str]
    own: Counter[str]

    def share(self, count: int) -> float:
        return count / self.samples if self.samples else 0.0


def frame_name(frame: str) -> str:
    """``fn (file.py:12)`` → ``fn (file.py)``."""
    return _LINE.sub(")", frame.strip())


def is_product(frame: str) -> bool:
    """Whether a frame is the product's own code (its file under one of ``PRODUCT``), not a
    development tool's."""
    _, _, where = frame.rpartition(" (")
    return where.startswith(PRODUCT) and not where.startswith("omniroute/tools/")


def parse(lines: Iterable[str]) -> Profile:
    """The counts of py-spy's raw output; lines that are not ``stack count`` are skipped."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    samples = 0
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        samples += n
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    return Profile(samples, inclusive, own)


def _rows(profile: Profile, counts: Iterable[tuple[str, int]]) -> list[str]:
    return [f"| {100 * profile.share(n):.1f} % | `{frame}` |" for frame, n in counts]


def render(profile: Profile, top_inclusive: int = 40, top_self: int = 25) -> str:
    """Two markdown tables: the product's frames by inclusive share, any frame by self share."""
    product = [(f, n) for f, n in profile.inclusive.most_common() if is_product(f)]
    own = profile.own.most_common(top_self)
    product_self = sum(n for f, n in profile.own.items() if is_product(f))
    return "\n".join(
        [
            f"{profile.samples} samples; the product's own code (self) "
            f"{100 * profile.share(product_self):.1f} % of them.",
            "",
            f"Inclusive, the product's frames (top {top_inclusive}):",
            "",
            "| share | frame |",
            "|---|---|",
            *_rows(profile, product[:top_inclusive]),
            "",
            f"Self, any code (top {top_self}):",
            "",
            "| share | frame |",
            "|---|---|",
            *_rows(profile, own),
        ]
    )
