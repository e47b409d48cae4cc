"""The ``GET /v1/models`` listing and ``GET /v1/models/{id}``, in the shape each SDK expects
(pure): OpenAI's ``{"object": "list", "data": [...]}``, or Anthropic's ``{"data": [...],
"has_more", "first_id", "last_id"}`` when the client speaks Anthropic's API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from omniroute.core.bounds import clip
from routing.domain.client.errors import GatewayError
from routing.domain.config.snapshot import ConfigSnapshot, KeyInfo


def model_ids(snapshot: ConfigSnapshot, key: KeyInfo) -> list[str]:
    """Combos and each connection's declared models that ``key`` may use, sorted."""
    names = set(snapshot.combos)
    for provider, connections in snapshot.connections.items():
        for connection in connections:
            if snapshot.key_may_use(key, connection.id):
                names.update(f"{provider}/{model}" for model in connection.served_models)
    return sorted(name for name in names if key.allows_model(name))


def _openai(snapshot: ConfigSnapshot, name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": _owner(snapshot, name)}


def _anthropic(name: str, created: int) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "model", "id": name, "display_name": name, "created_at": stamp}


def model_list(
    snapshot: ConfigSnapshot, key: KeyInfo, *, created: int, anthropic: bool = False
) -> bytes:
    """The model list body."""
    names = model_ids(snapshot, key)
    if anthropic:
        data = [_anthropic(name, created) for name in names]
        first, last = (names[0], names[-1]) if names else (None, None)
        return orjson.dumps({"data": data, "has_more": False, "first_id": first, "last_id": last})
    data = [_openai(snapshot, name, created) for name in names]
    return orjson.dumps({"object": "list", "data": data})


def model_detail(
    snapshot: ConfigSnapshot, key: KeyInfo, name: str, *, created: int, anthropic: bool = False
) -> bytes:
    """One model the key may use (listed, or served by a connection that serves any model),
    or a 404 ``model_not_found``."""
    if not _usable(snapshot, key, name):
        raise GatewayError(404, "model_not_found", f"The model '{clip(name)}' does not exist.")
    detail = _anthropic(name, created) if anthropic else _openai(snapshot, name, created)
    return orjson.dumps(detail)


def _usable(snapshot: ConfigSnapshot, key: KeyInfo, name: str) -> bool:
    if not key.allows_model(name):
        return False
    if name in snapshot.combos:
        return True
    provider, _, model = name.partition("/")
    return bool(model) and any(
        c.serves(model) and snapshot.key_may_use(key, c.id)
        for c in snapshot.connections_for(provider)
    )


def _owner(snapshot: ConfigSnapshot, name: str) -> str:
    return "omniroute" if name in snapshot.combos else name.partition("/")[0]
