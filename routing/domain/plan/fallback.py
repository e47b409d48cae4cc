"""The emergency fallback: the model that serves a request once every target has failed,
one per wire format (pure).

Written ``openai=provider/model,anthropic=provider/model``, either part optional, in
``OMNIROUTE_EMERGENCY_FALLBACK`` or the admin's ``emergency_fallback`` feature flag (which
overrides it at runtime). A combo name may stand for ``provider/model``.
"""

from __future__ import annotations

from routing.domain.config.vocabulary import WireFormat

_FORMATS = frozenset(WireFormat)


def parse_emergency_fallback(text: str) -> dict[str, str]:
    """The fallback model per wire format; ``ValueError`` names what is wrong."""
    chosen: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        wire_format, sep, model = (s.strip() for s in part.partition("="))
        if not sep or wire_format not in _FORMATS:
            formats = ", ".join(sorted(_FORMATS))
            raise ValueError(f"'{part}': expected <format>=<provider/model> with format {formats}")
        if not model or any(c.isspace() for c in model):
            raise ValueError(f"'{part}': the model is missing or holds spaces")
        if wire_format in chosen:
            raise ValueError(f"'{wire_format}' is given twice")
        chosen[wire_format] = model
    return chosen
