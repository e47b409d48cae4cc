"""Scrubbing secrets out of text before it leaves the gateway (pure; stdlib only).

An upstream error body relayed to a client, stored in ``last_error`` or logged goes through
:func:`scrub` first. It removes two things:

* the connection's own secrets, passed by the caller (each non-empty one of at least
  :data:`MIN_SECRET_CHARS` characters), wherever they occur: verbatim, base64-encoded
  (standard or URL-safe, alone or inside a longer encoded string such as a Basic
  credential), hex-encoded, URL-encoded, or with whitespace or quotes between its characters
  (``"sk-ab" "cd…"``, a key wrapped across lines);
* anything shaped like a credential: ``Bearer <token>`` (the word ``Bearer`` stays),
  ``sk-``/``sk_``/``rk-``/``pk-``-style keys (``sk-ant-…``, ``sk-proj-…``), a few other
  well-known key prefixes, a long base64/hex run after ``key=``/``api_key:``/``"api_key": "…"``/
  ``x-api-key:``, and JWT-looking ``eyJ….….…`` strings.

Each becomes :data:`REDACTED`. Bodies can be 64 KiB of hostile text, so every pattern is linear:
no nested quantifiers, every start is anchored on a literal (or on the start of a token run),
and each quantified class is followed by something it cannot match (or by nothing), so a failed
start costs at most the length of the run it scanned.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable, Iterable

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "SHORTEST_SHAPE", "scrub", "scrub_bytes"]

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8

_TOKEN = r"[A-Za-z0-9._~+/=-]"  # RFC 6750 b64token
_KEY_NAMES = (
    r"x-api-key|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token"
    r"|client[_-]?secret|secret[_-]?key|secret|token|key"
)


def _keep_prefix(match: re.Match[str]) -> str:
    # A function, not the template r"\1[redacted]": CPython imports ``re`` to expand a
    # template, which fails while the interpreter shuts down (and logging still runs then).
    return match.group(1) + REDACTED


# (pattern, replacement): the replacement keeps group 1 (the key's name) when there is one.
_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # JWT: three base64url segments. The lookbehind starts a match only at the start of a
    # token run, so "eyJ-eyJ-eyJ…" is scanned once, not once per "eyJ".
    (
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer[ \t]{1,8})" + _TOKEN + r"{16,}"), _keep_prefix),
    (
        re.compile(
            # The lookahead names the letters a key's name starts with: the engine then skips
            # to them instead of trying every name at every position (twice as fast).
            r"(?i)(?=[acrstkx])((?:" + _KEY_NAMES + r")[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?)"
            r"[A-Za-z0-9+/_.~-]{20,}={0,3}"
        ),
        _keep_prefix,
    ),
    (re.compile(r"\b(?:sk|rk|pk)[-_][A-Za-z0-9_-]{16,}"), REDACTED),
    (
        re.compile(
            r"\b(?:AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}"
            r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
        ),
        REDACTED,
    ),
)


# The shortest text a credential shape matches ("xoxb-" and ten characters): anything shorter,
# with no secret of the caller's to look for, has nothing to scrub.
SHORTEST_SHAPE = 15


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the given secrets and anything credential-shaped replaced by ``[redacted]``."""
    if len(text) < SHORTEST_SHAPE and not secrets:
        return text
    for secret in _usable(secrets):
        forms, spread = _encoded_forms(secret)
        for form in forms:
            if form in text:
                text = text.replace(form, REDACTED)
        text = spread.sub(REDACTED, text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def scrub_bytes(body: bytes, secrets: Iterable[str | None] = ()) -> bytes:
    """:func:`scrub` for a UTF-8 body; the same ``body`` object when nothing matched."""
    text = body.decode("utf-8", errors="replace")
    scrubbed = scrub(text, secrets)
    return body if scrubbed == text else scrubbed.encode("utf-8")


@functools.lru_cache(maxsize=256)
def _encoded_forms(secret: str) -> tuple[tuple[str, ...], re.Pattern[str]]:
    """The literal forms of ``secret`` an upstream may echo (hex, base64; longest first), and
    a pattern for the secret with whitespace or quotes between its characters and any of them
    percent-encoded (upper or lower case).

    The pattern is linear: each gap is a run of separators followed by a character (or a
    ``%``) the run cannot match.
    """
    raw = secret.encode("utf-8")
    forms = {raw.hex(), raw.hex().upper()}
    for encoded in _base64_cores(raw):
        forms.update((encoded, encoded.translate(_URL_SAFE)))
    kept = sorted((f for f in forms if len(f) >= MIN_SECRET_CHARS), key=len, reverse=True)
    gap = r"[\s\"'`+\\]*"
    spread = gap.join(_char_or_escape(char) for char in secret if not char.isspace())
    return tuple(kept), re.compile(spread)


def _char_or_escape(char: str) -> str:
    escaped = "".join(f"%{byte:02x}" for byte in char.encode("utf-8"))
    either_case = "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in escaped)
    return f"(?:{re.escape(char)}|{either_case})"


_URL_SAFE = str.maketrans("+/", "-_")


def _base64_cores(raw: bytes) -> list[str]:
    """The base64 of ``raw`` at each of the three byte alignments it can have inside a longer
    string, each cut to the characters that depend on ``raw`` alone; and ``raw``'s own base64,
    padding dropped."""
    cores = [base64.b64encode(raw).decode().rstrip("=")]
    for offset in (1, 2):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        whole_groups = (offset + len(raw)) // 3 * 4
        cores.append(encoded[4:whole_groups])
    cores.append(base64.b64encode(raw).decode()[: len(raw) // 3 * 4])
    return cores


def _usable(secrets: Iterable[str | None]) -> list[str]:
    # Longest first, so a secret that contains another one is replaced whole.
    kept = {secret for secret in secrets if secret and len(secret) >= MIN_SECRET_CHARS}
    return sorted(kept, key=len, reverse=True)
