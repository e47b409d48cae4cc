"""The ``GET /v1/models`` listing (pure)."""

from __future__ import annotations

import orjson

from routing.domain.config import ConfigSnapshot, KeyInfo


def model_ids(snapshot: ConfigSnapshot, key: KeyInfo) -> list[str]:
    """Combos and each connection's declared models that ``key`` may use, sorted."""
    names = set(snapshot.combos)
    for provider, connections in snapshot.connections.items():
        for connection in connections:
            if key.allows_connection(connection.id):
                names.update(f"{provider}/{model}" for model in connection.served_models)
    return sorted(name for name in names if key.allows_model(name))


def model_list(snapshot: ConfigSnapshot, key: KeyInfo, *, created: int) -> bytes:
    """An OpenAI model list body."""
    data = [
        {"id": name, "object": "model", "created": created, "owned_by": _owner(snapshot, name)}
        for name in model_ids(snapshot, key)
    ]
    return orjson.dumps({"object": "list", "data": data})


def _owner(snapshot: ConfigSnapshot, name: str) -> str:
    return "omniroute" if name in snapshot.combos else name.partition("/")[0]
