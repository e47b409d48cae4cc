"""OpenAI-style error bodies and the gateway's own routing errors (pure).

The error type itself and its body are the platform's (``omniroute.core.errors``), kept
importable from here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from omniroute.core.bounds import unwritable
from omniroute.core.errors import GatewayError as GatewayError
from omniroute.core.errors import error_body as error_body
from omniroute.core.scrub import scrub, scrub_bytes


def upstream_error_body(status: int, raw: bytes, secrets: Iterable[str | None] = ()) -> bytes:
    """An upstream error relayed in OpenAI shape: kept when already shaped, wrapped otherwise.

    Either way scrubbed: ``secrets`` (the connection's own) and anything shaped
    like a credential become ``[redacted]``.
    """
    secrets = _with_json_forms(secrets)
    if _is_shaped(raw):
        scrubbed = scrub_bytes(raw, secrets)
        if scrubbed is raw or _is_shaped(scrubbed):
            return scrubbed
    # Scrub before cutting: a secret cut in half would no longer be recognised.
    text = scrub(raw.decode("utf-8", "replace"), secrets).strip()[:2000]
    message = text or f"Upstream answered HTTP {status}"
    return error_body(message, _error_type_for(status), f"upstream_{status}")


def _with_json_forms(secrets: Iterable[str | None]) -> list[str]:
    """Each secret, and its JSON-escaped form where an encoder may write it differently."""
    forms = [secret for secret in secrets if secret]
    forms += [orjson.dumps(s).decode()[1:-1] for s in forms if '"' in s or "\\" in s]
    forms += [s.replace("/", "\\/") for s in forms if "/" in s]
    return forms


def _is_shaped(raw: bytes) -> bool:
    """Whether ``raw`` is already ``{"error": {...}}``."""
    try:
        parsed = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and isinstance(parsed.get("error"), dict)


def _error_type_for(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if status >= 500:
        return "upstream_error"
    return "invalid_request_error"


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error_body(status: int, body: bytes) -> bytes:
    """An error body in Anthropic's shape, ``{"type": "error", "error": {"type", "message"}}``,
    from the OpenAI-style one the gateway builds; the gateway's ``code`` is kept in the error
    object, other top-level fields (diagnostics, recovery hints) beside it. A body already in
    Anthropic's shape (an Anthropic upstream's) is kept as it is."""
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("type") == "error":
        return body
    if parsed is not None and unwritable(body, parsed):  # its fields cannot be written again
        parsed = None
    given = parsed.get("error") if isinstance(parsed, dict) else None
    given = given if isinstance(given, dict) else {}
    fallback = "api_error" if status >= 500 else "invalid_request_error"
    error: dict[str, Any] = {
        "type": _ANTHROPIC_TYPES.get(status, fallback),
        "message": str(given.get("message") or f"HTTP {status}"),
    }
    if given.get("code"):
        error["code"] = given["code"]
    rest = {k: v for k, v in parsed.items() if k != "error"} if isinstance(parsed, dict) else {}
    return orjson.dumps({"type": "error", "error": error, **rest})


# An in-band error's type as the status a plain answer would have had: the Messages API's
# types above read backwards (overloaded is 529), which the Chat Completions API shares.
_IN_BAND_STATUSES = {kind: status for status, kind in _ANTHROPIC_TYPES.items()} | {"api_error": 500}
IN_BAND_DEFAULT_STATUS = 502  # an error event whose type says nothing more


def in_band_status(body: bytes) -> int:
    """The status an upstream's in-band error event stands for (``{"error": {"type"}}``, in
    either API's shape): a prompt too long before the first token is the client's 400, as the
    same refusal of a plain request, not an upstream failure."""
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return IN_BAND_DEFAULT_STATUS
    error = parsed.get("error") if isinstance(parsed, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return (
        _IN_BAND_STATUSES.get(kind, IN_BAND_DEFAULT_STATUS)
        if isinstance(kind, str)
        else IN_BAND_DEFAULT_STATUS
    )
