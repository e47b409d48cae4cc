"""A whole gateway configured through the management API, for the configuration-as-code
tests (in process with DRF's client, and against real gateway processes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

PROVIDERS = ("alpha", "beta", "gamma")
CONNECTIONS = (1, 2)
BUILTIN_OFF = {
    "kind": "restatement",
    "provider": "agentrouter",
    "rule_id": "agentrouter-quota-misstatus",
    "is_enabled": False,
}
RULES_AND_FLAGS = {
    "error_rules": [
        {
            "provider": "alpha",
            "rule_id": "credit-balance",
            "status": 400,
            "match": "credit balance",
            "reason": "quota_exhausted",
        }
    ],
    "restatement_rules": [
        {
            "provider": "beta",
            "rule_id": "quota-as-403",
            "from_statuses": [403],
            "to_status": 429,
            "text_markers": ["quota"],
        }
    ],
    "builtin_rules": [BUILTIN_OFF],
    "feature_flags": [{"name": "emergency_fallback", "value": "openai=gamma/m1"}],
}
SETTINGS_PATCH = {"attempts": {"retriesPerTarget": 2}, "modelLockout": {"errorCodes": [429, 503]}}


class Api(Protocol):
    """Sends one management API request and returns the decoded answer (after checking its
    status)."""

    def __call__(self, method: str, path: str, payload: dict[str, Any]) -> Any: ...


def secret_of(provider: str, index: int) -> str:
    """The upstream secret of connection ``c<index>`` of ``provider``."""
    return f"sk-{provider}-c{index}-SECRET-0123456789"


def secret_variable(provider: str, index: int) -> str:
    """The variable an export names for that connection's secret."""
    return f"OMNIROUTE_PROVIDER_SECRET_{provider.upper()}__C{index}"


def secrets_environment() -> dict[str, str]:
    """Every connection's secret under the variable its reference names."""
    return {secret_variable(p, i): secret_of(p, i) for p in PROVIDERS for i in CONNECTIONS}


@dataclass(frozen=True)
class Configured:
    """What the configuration made that a test needs: the client key and the connection ids."""

    client_key: str
    connections: dict[tuple[str, int], int]


def configure(api: Api, base_url: Callable[[str, int], str]) -> Configured:
    """3 providers, 6 connections, 2 catalog entries, 4 combos of different strategies, a
    client key, 2 operator rules and a switched-off built-in one, a feature flag and settings.
    ``base_url(provider, index)``: a connection's base URL (index 0: the provider's)."""
    for slug in PROVIDERS:
        provider = {"slug": slug, "name": slug.title(), "category": "api_key"}
        api("POST", "/api/providers/", {**provider, "base_url": base_url(slug, 0)})
    ids = {
        (slug, i): _connection(api, slug, i, base_url(slug, i))
        for slug in PROVIDERS
        for i in CONNECTIONS
    }
    _catalog(api)
    _combos(api, ids)
    key = api(
        "POST",
        "/api/keys/",
        {"name": "team", "allowed_models": ["main", "spread", "rotate", "nested", "alpha/*"]},
    )
    api("PUT", "/api/config", RULES_AND_FLAGS)
    api("PATCH", "/api/resilience", SETTINGS_PATCH)
    return Configured(key["key"], ids)


def _connection(api: Api, slug: str, index: int, url: str) -> int:
    payload = {
        "provider": slug,
        "name": f"c{index}",
        "priority": index * 10,
        "base_url": url,
        "secret": secret_of(slug, index),
        "served_models": ["m1", "m2"],
        "disable_cooling": True,
    }
    return int(api("POST", "/api/connections/", payload)["id"])


def _catalog(api: Api) -> None:
    api(
        "POST",
        "/api/model-catalog/",
        {
            "provider": "alpha",
            "model": "m1",
            "context_window": 128_000,
            "supports_tools": True,
            "input_price_per_mtok": "0.15",
        },
    )
    api(
        "POST", "/api/model-catalog/", {"provider": "beta", "model": "m2", "accepts_prefill": "yes"}
    )


def _combos(api: Api, ids: dict[tuple[str, int], int]) -> None:
    combos: list[dict[str, Any]] = [
        {
            "name": "main",
            "strategy": "priority",
            "targets": [
                {"provider": "alpha", "model": "m1", "connection": ids[("alpha", 1)]},
                {"provider": "beta", "model": "m1"},
            ],
        },
        {
            "name": "spread",
            "strategy": "weighted",
            "options": {"stickyWeightedLimit": 2},
            "targets": [
                {"provider": "alpha", "model": "m1", "weight": 3},
                {"provider": "gamma", "model": "m1", "weight": 1},
            ],
        },
        {
            "name": "rotate",
            "strategy": "round-robin",
            "options": {"stickyRoundRobinLimit": 3},
            "attempt_overrides": {"retriesPerTarget": 0},
            "targets": [{"provider": "beta", "model": "m2"}, {"provider": "gamma", "model": "m2"}],
        },
        {
            "name": "nested",
            "strategy": "fill-first",
            "description": "main first, then gamma",
            "targets": [
                {"combo_ref": "main"},
                {"provider": "gamma", "model": "m1", "fallback_only_on_quota_exhaustion": True},
            ],
        },
    ]
    for combo in combos:
        api("POST", "/api/combos/", combo)
