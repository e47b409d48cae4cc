"""Browser origins: the trusted list an operator configures, and the rule a request's
``Origin`` must pass.

The rule is Django's CSRF origin check, so the admin's forms and the dashboard socket agree:
an origin is accepted when it equals the request's own origin (``scheme://host[:port]``, the
host as the request named it) or is listed as trusted, where ``https://*.example.org`` trusts
``example.org`` and every subdomain of it over https. Nothing here imports Django: the settings
parse the list before Django is set up.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["origin_accepted", "parse_trusted_origins"]

SCHEMES = ("http", "https")


def parse_trusted_origins(text: str) -> list[str]:
    """The comma-separated origins in ``text``, lower-cased; ``ValueError`` names a malformed
    one (no scheme, a path, a wildcard anywhere but the host's first label)."""
    return [_checked_origin(item.strip()) for item in text.split(",") if item.strip()]


def _checked_origin(origin: str) -> str:
    lowered = origin.lower()
    try:
        parts = urlsplit(lowered)
        parts.port  # noqa: B018  # raises ValueError on a malformed port
    except ValueError as error:
        raise ValueError(f"{origin!r} is not an origin: {error}") from error
    if parts.scheme not in SCHEMES or not parts.netloc:
        raise ValueError(f"{origin!r} is not an origin: write scheme://host[:port]")
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{origin!r} is not an origin: no path, not even a trailing slash")
    if "*" in parts.netloc.removeprefix("*."):
        raise ValueError(f"{origin!r}: a wildcard stands only for a first label (https://*.host)")
    return lowered


def origin_accepted(origin: str, *, own_origin: str | None, trusted: Iterable[str]) -> bool:
    """Whether a request from ``origin`` may proceed: it is the request's own origin (None when
    the request's host is not one the gateway serves) or one of the ``trusted`` origins."""
    if own_origin is not None and origin == own_origin:
        return True
    parts = urlsplit(origin)
    for entry in trusted:
        if origin == entry:
            return True
        scheme, _, netloc = entry.partition("://")
        if netloc.startswith("*.") and parts.scheme == scheme:
            domain = netloc[1:]  # ".example.org[:port]"
            if parts.netloc == domain[1:] or parts.netloc.endswith(domain):
                return True
    return False
