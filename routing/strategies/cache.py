"""The ``cache-optimized`` strategy: requests that share a prompt
prefix go to the same account, where the upstream's prompt cache already holds that prefix.

* ``prompt_cache_key`` - the request's cache key: the client's explicit ``prompt_cache_key``
  (at the root or in ``metadata``), else a hash of the prompt's opening (the system part and
  the first user turn), which every later turn of the conversation repeats: so a conversation
  stays on one account from its first turn on (the reference keys its earlier turns instead,
  which changes with every turn); else None;
* ``rendezvous`` - rendezvous (highest random weight) hashing of the targets for that key: each
  target's score is the first 128 bits of SHA-256(key, 0x00, identity), highest first. The same
  key always puts the same account first, and removing one account moves only the keys that
  preferred it;
* ``target_identity`` - what a target is hashed as: its connection, or its execution key when
  the plan holds several models on that connection.

The strategy owns its ordering: it outranks session stickiness (the caller applies no pin).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from omniroute.core.digest import sha256_hex
from omniroute.core.store import StateStore
from routing.domain.plan.planning import Target
from routing.strategies.keys import execution_key
from routing.strategies.request import Ordered, OrderRequest

__all__ = [
    "MAX_PROMPT_CACHE_KEY_CHARS",
    "order_cache",
    "prompt_cache_key",
    "rendezvous",
    "target_identity",
]

MAX_PROMPT_CACHE_KEY_CHARS = 4096  # a longer explicit key is ignored
_SCORE_BYTES = 16  # 128 bits of the digest

# The parts of a request that form its reusable prefix: the system prompt of a Messages
# payload, the instructions of a Responses payload (Chat Completions carries its system
# messages inside ``messages``), then the conversation items in order.
_SYSTEM_FIELDS = ("system", "instructions")
_ITEM_FIELDS = ("messages", "input")
_SYSTEM_ROLES = ("system", "developer")


def prompt_cache_key(payload: Mapping[str, Any]) -> str | None:
    """The request's cache key: an explicit ``prompt_cache_key`` (root first, then
    ``metadata``; a non-empty string of at most 4096 characters, anything else is ignored),
    else the SHA-256 hex digest of the canonical JSON of its reusable prefix, else None.

    The prefix is the system part (``system`` of a Messages payload, ``instructions`` of a
    Responses payload) plus the leading system items and the first other ``messages`` /
    ``input`` item (a string ``input`` is that item). So a conversation keeps its key turn
    after turn.
    """
    explicit = _explicit_key(payload)
    if explicit is not None:
        return explicit
    prefix = _reusable_prefix(payload)
    if prefix is None:
        return None
    try:
        canonical = json.dumps(
            prefix, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    except (ValueError, RecursionError):  # a circular or absurdly deep structure: no affinity
        return None
    return sha256_hex(canonical.encode())


def rendezvous(
    targets: Sequence[Target], key: str, identity: Callable[[Target], str]
) -> tuple[Target, ...]:
    """Cache-optimized: the targets by descending rendezvous score for ``key``, the integer
    value (big-endian) of the first 16 bytes of SHA-256(key ‖ 0x00 ‖ identity(target)), both
    UTF-8; ties by identity (lexical), then declared order."""
    identities = [identity(t) for t in targets]
    scores = [_score(key, name) for name in identities]
    order = sorted(range(len(targets)), key=lambda i: (-scores[i], identities[i], i))
    return tuple(targets[i] for i in order)


def target_identity(target: Target, targets: Sequence[Target]) -> str:
    """What ``rendezvous`` hashes ``target`` as: ``connection:<id>``, or
    ``execution:<connection id>:<model>`` when another of ``targets`` uses the same
    connection (so that the models of one account still spread between themselves)."""
    same = sum(1 for t in targets if t.connection.id == target.connection.id)
    if same > 1:
        return f"execution:{execution_key(target)}"
    return f"connection:{target.connection.id}"


def _score(key: str, identity: str) -> int:
    digest = hashlib.sha256(key.encode() + b"\x00" + identity.encode()).digest()
    return int.from_bytes(digest[:_SCORE_BYTES], "big")


def _explicit_key(payload: Mapping[str, Any]) -> str | None:
    metadata = payload.get("metadata")
    candidates = [payload.get("prompt_cache_key")]
    if isinstance(metadata, Mapping):
        candidates.append(metadata.get("prompt_cache_key"))
    for value in candidates:
        if isinstance(value, str) and value.strip() and len(value) <= MAX_PROMPT_CACHE_KEY_CHARS:
            return value
    return None


def _reusable_prefix(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The part of the prompt every turn of the conversation starts with: the system part,
    the leading system items and the first other item (the opening user turn); None when
    there is none of them."""
    prefix: dict[str, Any] = {
        name: payload[name] for name in _SYSTEM_FIELDS if not _empty(payload.get(name))
    }
    items: list[Any] = next(
        (payload[name] for name in _ITEM_FIELDS if isinstance(payload.get(name), list)), []
    )
    text = payload.get("input")
    if isinstance(text, str) and text.strip():  # Responses: a string input is one user turn
        items = [{"role": "user", "content": text}]
    opening: list[Any] = []
    for item in items:
        opening.append(item)
        if not (isinstance(item, Mapping) and item.get("role") in _SYSTEM_ROLES):
            break
    if opening:
        prefix["items"] = opening
    return prefix or None


def _empty(value: object) -> bool:
    """Nothing to reuse: missing, null, a blank string, an empty list or object."""
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, list | dict) and not value)


async def order_cache(request: OrderRequest, store: StateStore) -> Ordered | None:
    """``cache-optimized``: rendezvous hashing of the prompt's cache key over the accounts (no
    key: the declared order)."""
    key = prompt_cache_key(request.payload or {})
    if key is None:
        return None
    targets = request.plan.targets
    return Ordered(rendezvous(targets, key, lambda t: target_identity(t, targets)))
