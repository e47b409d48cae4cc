"""Encoding a client's request for one target."""

from __future__ import annotations

from typing import Any

import orjson

from routing.domain.plan.planning import Target


def encode_for_target(payload: dict[str, Any], target: Target) -> bytes:
    """The body sent upstream: the client's, with the model the target expects."""
    return orjson.dumps({**payload, "model": target.model})
