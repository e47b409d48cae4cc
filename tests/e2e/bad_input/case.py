"""One case of the bad-input corpus (``tests/e2e/test_bad_input_corpus.py``), and the helpers
that build the bodies of the cases: a surface's valid body, with a member added or replaced, and
deep nesting."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from tests.e2e.hostile_support import Surface

MODEL = b"@MODEL@"  # replaced by the case's route model
PROVIDER = b"@PROVIDER@"  # replaced by the route's provider slug
LEASE = "lease"
MANAGEMENT = "management"
SOCKET = "websocket"


@dataclass(frozen=True)
class Case:
    """One hostile request and what it must get."""

    surface: str
    name: str
    status: int
    content: bytes = b""
    method: str = "POST"
    path: str = ""  # the surface's own path unless told
    headers: dict[str, str] = field(default_factory=dict)
    auth: str = "key"  # "key", "none", "wrong", or a literal Authorization value
    upstream_due: bool = False  # the gateway should serve it: one upstream request

    @property
    def id(self) -> str:
        return f"{self.surface}: {self.name}"


def valid(surface: Surface) -> bytes:
    return orjson.dumps(surface.body("@MODEL@"))


def with_member(surface: Surface, member: bytes) -> bytes:
    return valid(surface)[:-1] + b", " + member + b"}"


def replaced(surface: Surface, name: str, value: bytes) -> bytes:
    """The surface's valid body with ``name`` set to the raw JSON ``value`` (or left out)."""
    payload = {k: v for k, v in surface.body("@MODEL@").items() if k != name}
    body = orjson.dumps(payload)
    return body if value == b"" else body[:-1] + b', "' + name.encode() + b'": ' + value + b"}"


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth
