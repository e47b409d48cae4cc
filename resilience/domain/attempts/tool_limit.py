"""A target's limit on tools, learnt from the 400 that says a request carried too many (pure).

Providers cap how many tools one request may declare (128 is common) and say so in a 400:
"too many tools (max 128)", "tools: array too long, maximum 128", "at most 128 tools". Such a
400 is the request's mismatch with that target, not the client's mistake: the next target may
take it (as with a context too long), and the limit is worth remembering so that later
requests over it skip the target without asking it.
"""

from __future__ import annotations

import re

from resilience.domain.classify.text_match import Matcher, matches_any, pattern

TOO_MANY_TOOLS: tuple[Matcher, ...] = tuple(
    pattern(source)
    for source in (
        r"too many tools",
        r"\btools\b.*(?:too long|exceed|at most|maximum|max\b|limit)",
        r"(?:maximum|max\b|limit).*\btools\b",
        r"(?:number of|count of) (?:tools|functions)",
    )
)
# The number after "max", "maximum", "at most", "limit", "up to" (first one wins).
_LIMIT = re.compile(
    r"(?:\bmax(?:imum)?|\bat most|\blimit(?:ed)?|\bup to)\b\D{0,24}?(\d{1,5})", re.IGNORECASE
)


def tool_limit(text: str) -> int | None:
    """The limit a too-many-tools error states, or ``None`` when ``text`` is not one or
    states no number."""
    if not matches_any(text, TOO_MANY_TOOLS):
        return None
    found = _LIMIT.search(text)
    if found is None:
        return None
    limit = int(found.group(1))
    return limit if limit > 0 else None


def is_tool_limit(text: str) -> bool:
    """Whether ``text`` reads as a too-many-tools refusal (with a number or not)."""
    return matches_any(text, TOO_MANY_TOOLS)
