"""Whether a target can serve what a request needs, by its model-catalog entry (pure;
capability and context-window filtering, and the terminal reasons of a skipped target).

A target is incompatible when its catalog entry says, explicitly, that the model lacks tool
calling or structured output the request asks for, or when its context window is smaller than
the request's estimated input plus its requested output (``routing.domain.plan.needs``). Anything
the
catalog does not know (no entry, or ``None``) keeps the target: the upstream decides.

When no target is left, the request is answered without asking any upstream:
404 ``context_requirements_exhausted`` when every target was too small, else 400
``capability_mismatch``; both with diagnostics naming each skipped target and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from omniroute.core.bounds import clip
from routing.domain.client.errors import GatewayError
from routing.domain.config.snapshot import CatalogEntry
from routing.domain.plan.needs import RequestNeeds

CONTEXT_EXHAUSTED = "context_requirements_exhausted"
CAPABILITY_MISMATCH = "capability_mismatch"


class Incompatibility(StrEnum):
    """Why a target cannot serve a request."""

    TOOLS = "tools"  # the request lets the model call tools; the model cannot
    STRUCTURED_OUTPUT = "structured_output"  # JSON schema / JSON mode asked; not supported
    CONTEXT_WINDOW = "context_window"  # the prompt and the output do not fit


def incompatibilities(
    entry: CatalogEntry | None, needs: RequestNeeds
) -> tuple[Incompatibility, ...]:
    """Every reason the model of ``entry`` cannot serve ``needs`` (empty: it may)."""
    if entry is None:
        return ()
    found: list[Incompatibility] = []
    if needs.tools and entry.supports_tools is False:
        found.append(Incompatibility.TOOLS)
    if needs.structured_output and entry.supports_structured_output is False:
        found.append(Incompatibility.STRUCTURED_OUTPUT)
    window = entry.context_window
    if window is not None and needs.context_tokens > window:
        found.append(Incompatibility.CONTEXT_WINDOW)
    return tuple(found)


def fits_context(reasons: Sequence[Incompatibility]) -> bool:
    """Whether a target skipped for ``reasons`` would fit the request's context: such a target
    is restored by ``compatFilterFailOpen``, which relaxes only the capability checks."""
    return Incompatibility.CONTEXT_WINDOW not in reasons


# (provider slug, model, connection id, reasons) of one skipped target
Skipped = tuple[str, str, int, tuple[Incompatibility, ...]]


def compatibility_error(
    model: str, needs: RequestNeeds, skipped: Sequence[Skipped]
) -> GatewayError:
    """The answer when every target of ``model`` was skipped as incompatible."""
    too_small = all(not fits_context(reasons) for *_, reasons in skipped)
    diagnostics: dict[str, Any] = {
        "terminalReason": CONTEXT_EXHAUSTED if too_small else CAPABILITY_MISMATCH,
        "inputTokens": needs.input_tokens,
        "maxOutputTokens": needs.max_output_tokens,
        "skipped": [
            {"provider": p, "model": m, "connection": c, "reasons": [r.value for r in reasons]}
            for p, m, c, reasons in skipped
        ],
    }
    if too_small:
        asked = f"about {needs.input_tokens} input tokens"
        if needs.max_output_tokens:
            asked += f" plus {needs.max_output_tokens} output tokens"
        message = f"No target of '{clip(model)}' has a context window large enough for {asked}."
        return GatewayError(404, CONTEXT_EXHAUSTED, message, extra={"diagnostics": diagnostics})
    features = (("tools", needs.tools), ("structured output", needs.structured_output))
    wanted = [name for name, needed in features if needed]
    message = f"No target of '{clip(model)}' supports what this request needs: {', '.join(wanted)}."
    return GatewayError(400, CAPABILITY_MISMATCH, message, extra={"diagnostics": diagnostics})
