"""Combo ``team`` over three connections of ``acme``, one step each, for the strategy tests."""

from __future__ import annotations

from typing import Any

from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.harness import add_connection

KEYS = ("sk-acme-A-0001", "sk-acme-B-0002", "sk-acme-C-0003")


def combo_of(
    acme: Provider,
    strategy: str,
    weights: tuple[int, ...] = (1, 1, 1),
    *,
    options: dict[str, Any] | None = None,
    flags: tuple[bool, ...] = (False, False, False),
) -> list[int]:
    """Three connections of ``acme`` (ids returned, by priority), one combo step each, with
    their ``weights`` and ``fallback_only_on_quota_exhaustion`` ``flags``."""
    ids = [
        add_connection(acme, name, key, priority=10 * n)
        for n, (name, key) in enumerate(zip("abc", KEYS, strict=True), start=1)
    ]
    targets = [
        {
            "provider": acme,
            "model": "m1",
            "connection_id": cid,
            "weight": weight,
            "fallback_only_on_quota_exhaustion": flag,
        }
        for cid, weight, flag in zip(ids, weights, flags, strict=True)
    ]
    fields = {"name": "team", "strategy": strategy, "options": options or {}}
    combo_save(combo=Combo(), fields=fields, targets=targets)
    return ids
