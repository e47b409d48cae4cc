"""A busy gateway's state for the admin's layout test, written through the project's services:
30 rows in every list (providers, connections cooling, with locked models or in a terminal
state, breakers some open, leases, error and restatement rules, combos with targets, catalog
entries, keys, affinity pins, logged requests with their trails), with the long names and
error texts real upstreams send."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from decimal import Decimal

from asgiref.sync import async_to_sync

from leases.domain.tokens import owner_hash
from leases.services import lease_acquire
from omniroute.core import tasks
from omniroute.core.observability.requestlog.record import RequestRecord, StepKind, TrailStep
from omniroute.core.observability.requestlog.services import request_log_write
from omniroute.core.store import StateStore
from resilience.domain.breaker.policy import BreakerPolicy
from resilience.domain.connection_state import (
    BANNED,
    CREDITS_EXHAUSTED,
    EXPIRED,
    UNAVAILABLE,
    ConnectionState,
)
from resilience.models.rules import ProviderErrorRule, StatusRestatementRule
from resilience.services.breakers import breaker_record_failure
from resilience.services.connections import connection_key
from resilience.services.rules import error_rule_save, restatement_rule_save
from routing.domain.config.vocabulary import ProviderCategory, Scope, Strategy
from routing.models import Combo, FeatureFlag, ModelCatalogEntry, Provider, ProviderConnection
from routing.services import (
    api_key_create,
    catalog_entry_save,
    combo_save,
    connection_save,
    feature_flag_save,
    provider_save,
)
from routing.services.affinity import affinity_pin_answered
from routing.services.connections import connection_state_write
from tests.leases.support import new_owner
from tests.resilience.lockout_support import lock

ROWS = 30
VENDORS = ("openai", "anthropic", "gemini", "mistral", "deepseek", "groq")
MODELS = (
    "gpt-4.1-mini-2025-04-14",
    "claude-sonnet-4-20250514",
    "gemini-2.5-pro-preview-06-05",
    "mistral-large-latest",
    "deepseek-reasoner",
    "llama-3.3-70b-versatile",
)
QUOTA_TEXT = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: https://platform.openai.com/docs/guides/errors"
)
TERMINAL_STATES = (BANNED, EXPIRED, CREDITS_EXHAUSTED)


@dataclass(frozen=True, slots=True)
class Seeded:
    """What the seed made, for the test's checks."""

    connections: list[ProviderConnection]
    cooling: int
    terminal: int
    locked: int
    open_breakers: int
    leases: int


def _provider(index: int) -> Provider:
    vendor = VENDORS[index % len(VENDORS)]
    slug = f"{vendor}-{'eu' if index % 2 else 'us'}-west-{index:02d}"
    fields = {
        "slug": slug,
        "name": f"{vendor.title()} production account {index:02d} (shared team quota)",
        "category": list(ProviderCategory)[index % 3],
        "base_url": f"https://api.{vendor}.example.com/v1",
        "full_text_rules": index % 2 == 0,
        "egress_bucketed_lock": index % 3 == 0,
    }
    return provider_save(provider=Provider(), fields=fields)


def _connection(provider: Provider, index: int) -> ProviderConnection:
    fields = {
        "provider": provider,
        "name": f"{provider.slug}-team-key-{index:02d}",
        "priority": index,
        "served_models": list(MODELS[:3]),
    }
    secret = f"sk-proj-{hashlib.sha256(str(index).encode()).hexdigest()}"
    return connection_save(connection=ProviderConnection(), fields=fields, secret=secret)


def _state(index: int, now: float) -> ConnectionState | None:
    """Ten cooling, six terminal, the rest healthy (some of those get locked models)."""
    if index < 10:
        return ConnectionState(
            UNAVAILABLE,
            rate_limited_until=now + 60 + 37 * index,
            backoff_level=1 + index % 4,
            last_error=QUOTA_TEXT,
            last_error_at=now - 3,
            last_error_type="rate_limit_exceeded",
            error_code="429",
        )
    if index < 16:
        terminal = TERMINAL_STATES[index % 3]
        return ConnectionState(
            terminal, last_error=QUOTA_TEXT, last_error_at=now - 60, error_code="403"
        )
    return None


def _set_state(store: StateStore, connection_id: int, state: ConnectionState) -> None:
    """As the gateway keeps it: the store's record, written through to the row."""
    async_to_sync(store.set)(connection_key(connection_id), state.to_dict())
    connection_state_write(connection_id, state)


def _lock_models(store: StateStore, connections: list[ProviderConnection]) -> int:
    """30 locks: two or three models on each of the healthy connections and a few cooling."""
    locks = 0
    for index, connection in enumerate(connections[5:10] + connections[16:]):
        for model in MODELS[: 2 + index % 2]:
            if locks < ROWS:
                lock(store, connection.provider_id, connection.pk, model, seconds=90 + 11 * locks)
                locks += 1
    return locks


def _breakers(store: StateStore, providers: list[Provider]) -> int:
    """Every provider's breaker: eight open, eight degraded, the rest with a failure or none."""

    async def fail_all() -> None:
        policy = BreakerPolicy(failure_threshold=5, reset_timeout=45.0)
        for index, provider in enumerate(providers):
            failures = 5 if index < 8 else 3 if index < 16 else index % 2
            for _ in range(failures):
                await breaker_record_failure(store=store, name=provider.slug, policy=policy)
        await tasks.flush()

    async_to_sync(fail_all)()
    return 8


def _rules(providers: list[Provider]) -> None:
    for index, provider in enumerate(providers):
        error = {
            "provider": provider.slug,
            "rule_id": f"quota-exhausted-billing-hard-limit-{index:02d}",
            "status": 429,
            "match": QUOTA_TEXT[: 60 + index],
            "header_name": "x-ratelimit-remaining-requests" if index % 2 else "",
            "header_value": "0" if index % 2 else "",
            "scope": ["model", "provider", "connection"][index % 3],
            "cooldown_ms": 3_600_000 + index * 1000,
        }
        error_rule_save(rule=ProviderErrorRule(), fields=error)
        restatement = {
            "provider": provider.slug,
            "rule_id": f"misstated-forbidden-is-rate-limit-{index:02d}",
            "from_statuses": [400, 403],
            "to_status": 429,
            "text_markers": ["Resource has been exhausted", "check quota", "rate limit reached"],
            "exclude_markers": ["invalid api key", "permission denied"],
            "default_retry_after_ms": 60_000,
        }
        restatement_rule_save(rule=StatusRestatementRule(), fields=restatement)


def _combos(providers: list[Provider], connections: list[ProviderConnection]) -> None:
    strategies = list(Strategy)
    for index in range(ROWS):
        targets = [
            {
                "provider": providers[(index + step) % ROWS],
                "model": MODELS[(index + step) % len(MODELS)],
                "connection": connections[(index + step) % ROWS] if step % 2 else None,
                "weight": 10 * (step + 1),
                "fallback_only_on_quota_exhaustion": step == 3,
            }
            for step in range(2 + index % 3)
        ]
        fields = {
            "name": f"coding-agent-{MODELS[index % len(MODELS)]}-{index:02d}",
            "strategy": strategies[index % len(strategies)],
            "description": "Long-running coding sessions: the cheapest capable model first, "
            "then the strongest one when the first runs out of quota.",
        }
        combo_save(combo=Combo(), fields=fields, targets=targets)


def _catalog(providers: list[Provider]) -> None:
    for index, provider in enumerate(providers):
        entry = ModelCatalogEntry(
            provider=provider,
            model=MODELS[index % len(MODELS)],
            context_window=200_000,
            time_to_first_token_ms=8_000,
            stream_idle_ms=30_000,
            hedge_after_ms=2_500,
            input_price_per_mtok=Decimal("3.0000"),
            output_price_per_mtok=Decimal("15.0000"),
            supports_tools=True,
        )
        catalog_entry_save(entry=entry)


def _keys_and_leases(connections: list[ProviderConnection], now: dt.datetime) -> int:
    key, _ = api_key_create(
        name="ci-runner-managed-sessions",
        scopes=[Scope.LEASE_EXCLUSIVE],
        allowed_connections=connections,
    )
    for index in range(ROWS - 1):
        api_key_create(
            name=f"team-{index:02d}-coding-agent-key",
            scopes=[Scope.MANAGE] if index % 5 == 0 else [],
            allowed_models=[f"{connections[index].provider_id}/*", "coding-agent-*"],
            expires_at=now + dt.timedelta(days=30 + index),
        )
    for connection in connections:
        lease_acquire(
            owner_hash=owner_hash(new_owner()),
            api_key_id=key.pk,
            provider=connection.provider_id,
            connection_id=connection.pk,
            ttl_ms=300_000,
            now=now,
        )
    return len(connections)


def _pins(store: StateStore, connections: list[ProviderConnection]) -> None:
    async def answer_all() -> None:
        for index, connection in enumerate(connections):
            session = hashlib.sha256(f"session-{index}".encode()).hexdigest()
            await affinity_pin_answered(
                store=store,
                provider=connection.provider_id,
                key_hash=session,
                connection_id=connection.pk,
                ttl_seconds=1800,
            )
        await tasks.flush()

    async_to_sync(answer_all)()


def _requests(connections: list[ProviderConnection], now: dt.datetime) -> None:
    """Logged requests, every other one failed over from the previous connection."""
    records = []
    for index, connection in enumerate(connections):
        label = f"{connection.provider_id}/{MODELS[index % len(MODELS)]}"
        trail: tuple[TrailStep, ...] = (
            TrailStep(StepKind.TRIED, label, connection.pk, "success", 200, 1234),
        )
        if index % 2:
            failed = TrailStep(StepKind.TRIED, label, connections[index - 1].pk, "http_error", 429)
            trail = (failed, *trail)
        records.append(
            RequestRecord(
                request_id=f"{index:04d}" + "f" * 20,
                started_at=now.timestamp() - index,
                endpoint="/v1/chat/completions",
                status=(200, 503, 429)[index % 3],
                latency_ms=12_345,
                key_name=f"a-rather-long-client-key-name-for-team-{index}",
                key_prefix="sk-or-abcdefgh",
                model=f"combo-of-a-long-name-{index}",
                provider=connection.provider_id,
                target_model=MODELS[index % len(MODELS)],
                connection_id=connection.pk,
                connection_name=connection.name,
                error_code="all_targets_cooling_down" if index % 3 else "",
                attempts=len(trail),
                trail=trail,
            )
        )
    request_log_write(records=records)


def seed_busy_gateway(store: StateStore, now: dt.datetime) -> Seeded:
    """Write 30 rows of every kind of state the admin lists (see the module docstring)."""
    providers = [_provider(index) for index in range(ROWS)]
    connections = [_connection(p, index) for index, p in enumerate(providers)]
    states = [_state(index, now.timestamp()) for index in range(ROWS)]
    for connection, state in zip(connections, states, strict=True):
        if state is not None:
            _set_state(store, connection.pk, state)
    locked = _lock_models(store, connections)
    open_breakers = _breakers(store, providers)
    _rules(providers)
    _combos(providers, connections)
    _catalog(providers)
    leases = _keys_and_leases(connections, now)
    _pins(store, connections)
    _requests(connections, now)
    fallback = f"openai={providers[0].slug}/{MODELS[0]},anthropic={providers[1].slug}/{MODELS[1]}"
    fields = {"name": FeatureFlag.Name.EMERGENCY_FALLBACK, "value": fallback, "enabled": False}
    feature_flag_save(flag=FeatureFlag(), fields=fields)
    return Seeded(connections, 10, 6, locked, open_breakers, leases)
