"""Reads of the routing configuration (sync ORM; call through ``database_sync_to_async``),
and of connections' live cooldown and terminal state (sync only: they bridge to the store)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from omniroute.core.bounds import clip, is_header_value
from omniroute.core.state import get_store
from resilience.domain.attempts.policy import AttemptPolicy
from resilience.domain.connection_state import CLEAN, ConnectionState
from resilience.domain.connection_state import TERMINAL as TERMINAL_STATUSES
from resilience.domain.policies import (
    breaker_policy_for,
    cooldown_profile_for,
    window_gate_policy_for,
)
from resilience.domain.settings.document import resilience_settings_of
from resilience.selectors.rules import rules_for_snapshot
from resilience.selectors.settings import settings_resolved_current
from resilience.services.connections import connection_state_get, connection_states_recorded
from resilience.services.lockout_operations import lockouts_by_connection
from routing.domain.config.combo_options import options_read
from routing.domain.config.snapshot import (
    CatalogEntry,
    ComboInfo,
    ComboStep,
    ConfigSnapshot,
    ConnectionInfo,
    KeyInfo,
    ProviderInfo,
    Unsendable,
    managed_connection_set,
)
from routing.domain.plan.fallback import parse_emergency_fallback
from routing.domain.quota.rate_limits import read_overrides
from routing.domain.settings.overrides import attempt_overrides_read, with_overrides
from routing.domain.settings.sections import (
    ATTEMPTS,
    COMBO_COOLDOWN_WAIT,
    QUOTA_SHARE,
    REQUEST_QUEUE,
    SESSION_AFFINITY,
    STREAM_RECOVERY,
)
from routing.models import (
    ClientApiKey,
    Combo,
    ComboTarget,
    FeatureFlag,
    ModelCatalogEntry,
    Provider,
    ProviderConnection,
)
from routing.models.providers import UpstreamUrl

logger = logging.getLogger(__name__)


def _provider_info(provider: Provider) -> ProviderInfo:
    return ProviderInfo(
        slug=provider.slug,
        name=provider.name,
        category=provider.category,
        base_url=provider.base_url.rstrip("/"),
        wire_format=provider.wire_format,
        full_text_rules=provider.full_text_rules,
        honors_rule_scope=provider.honors_rule_scope,
        egress_bucketed_lock=provider.egress_bucketed_lock,
        per_model_quota=provider.per_model_quota,
        max_concurrent=provider.max_concurrent,
    )


def _unsendable(connection: ProviderConnection, secret: str | None) -> Unsendable:
    """What of the row the upstream client cannot send: the checks its fields make on save,
    for a row stored before they did."""
    if secret and not is_header_value(secret):
        return Unsendable.SECRET
    addresses = [(Unsendable.BASE_URL, UpstreamUrl(base=True), connection.effective_base_url)]
    if connection.proxy_url:
        addresses.append((Unsendable.PROXY_URL, UpstreamUrl(), connection.proxy_url))
    for part, check, url in addresses:
        try:
            check(url)
        except ValidationError:
            return part
    return Unsendable.NOTHING


def _connection_info(connection: ProviderConnection) -> ConnectionInfo:
    secret = connection.get_secret()
    unsendable = _unsendable(connection, secret)
    # told at every snapshot, never per request, and never the secret or the URL itself
    if unsendable is Unsendable.SECRET:
        logger.warning(
            "connection %s (%s/%s): its secret cannot be sent in a header; enter it again",
            connection.pk,
            connection.provider_id,
            clip(connection.name),
        )
    elif unsendable is not Unsendable.NOTHING:
        logger.warning(
            "connection %s (%s/%s): its %s cannot be used by the gateway's HTTP client; "
            "enter it again",
            connection.pk,
            connection.provider_id,
            clip(connection.name),
            unsendable.value,
        )
    return ConnectionInfo(
        id=connection.pk,
        provider=connection.provider_id,
        name=connection.name,
        priority=connection.priority,
        base_url=connection.effective_base_url,
        auth_type=connection.auth_type,
        secret=secret,
        unsendable=unsendable,
        served_models=tuple(str(m) for m in connection.served_models or ()),
        max_concurrent=connection.max_concurrent,
        rate_limit_protection=connection.rate_limit_protection,
        overrides=read_overrides(connection.rate_limit_overrides),
        state=connection_state_durable(connection),
        disable_cooling=connection.disable_cooling,
        proxy_url=connection.proxy_url,
    )


def connection_state_durable(connection: ProviderConnection) -> ConnectionState:
    """The cooldown and terminal state the row holds: the store's durable (maybe lagging) copy;
    a row with nothing to clear holds :data:`CLEAN` itself (its ``is_clean`` costs a compare)."""
    state = ConnectionState(
        test_status=connection.test_status,
        rate_limited_until=_epoch(connection.rate_limited_until),
        backoff_level=connection.backoff_level,
        last_error=connection.last_error,
        last_error_at=_epoch(connection.last_error_at),
        last_error_type=connection.last_error_type,
        error_code=connection.error_code,
    )
    return CLEAN if state == CLEAN else state


def connection_state_columns(state: ConnectionState) -> dict[str, Any]:
    """``state`` as the row's columns hold it (the inverse of ``connection_state_durable``)."""
    return {
        "test_status": state.test_status,
        "rate_limited_until": _moment(state.rate_limited_until),
        "backoff_level": state.backoff_level,
        "last_error": state.last_error,
        "last_error_at": _moment(state.last_error_at),
        "last_error_type": state.last_error_type,
        "error_code": state.error_code,
    }


def connection_states_live(
    connections: Iterable[ProviderConnection],
) -> dict[int, ConnectionState]:
    """Each connection's live state by id: the state store's record (authoritative), else the
    row's. The store is read for all of them at once; sync callers only (admin, API views)."""
    return connection_states_over({c.pk: connection_state_durable(c) for c in connections})


def connection_states_over(durable: dict[int, ConnectionState]) -> dict[int, ConnectionState]:
    """Each connection's live state by id, over the durable states given (the snapshot's, or
    the rows'); sync callers only."""
    return async_to_sync(_states_live)(durable) if durable else {}


def connection_state_live(connection: ProviderConnection) -> ConnectionState:
    """One connection's live state (see ``connection_states_live``)."""
    return connection_states_live([connection])[connection.pk]


LIVE_READ_BATCH = 16  # store reads in flight at once: a long list must not flood the pool


async def _states_live(durable: dict[int, ConnectionState]) -> dict[int, ConnectionState]:
    store, items = get_store(), list(durable.items())
    states: list[ConnectionState] = []
    for start in range(0, len(items), LIVE_READ_BATCH):
        batch = items[start : start + LIVE_READ_BATCH]
        states += await asyncio.gather(
            *(connection_state_get(store=store, connection_id=i, durable=d) for i, d in batch)
        )
    return dict(zip(durable, states, strict=True))


def connection_names(ids: Collection[int]) -> dict[int, str]:
    """The names of the given connections, in one query (missing ones are left out)."""
    return dict(ProviderConnection.objects.filter(pk__in=ids).values_list("pk", "name"))


def _epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _moment(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if epoch is not None else None


def _key_info(key: ClientApiKey) -> KeyInfo:
    return KeyInfo(
        id=key.pk,
        name=key.name,
        prefix=key.prefix,
        scopes=frozenset(key.scopes or ()),
        allowed_models=tuple(key.allowed_models or ()),
        allowed_connections=frozenset(c.pk for c in key.allowed_connections.all()),
        is_active=key.is_active,
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
    )


def _combo_step(target: ComboTarget) -> ComboStep:
    """A target as the snapshot holds it (its nested combo by name: prefetched with it)."""
    return ComboStep(
        provider=target.provider_id or "",
        model=target.model,
        connection_id=target.connection_id,
        weight=target.weight,
        combo_ref=target.combo_ref.name if target.combo_ref is not None else None,
        fallback_only_on_quota_exhaustion=target.fallback_only_on_quota_exhaustion,
    )


def _combo_info(combo: Combo, attempts: AttemptPolicy) -> ComboInfo:
    overrides = attempt_overrides_read(combo.attempt_overrides)
    return ComboInfo(
        name=combo.name,
        strategy=combo.strategy,
        steps=tuple(_combo_step(t) for t in combo.targets.all()),
        attempts=with_overrides(attempts, overrides) if overrides else None,
        options=options_read(combo.strategy, combo.options),
    )


def combo_list_snapshot(attempts: AttemptPolicy) -> dict[str, ComboInfo]:
    """The active combos by name, with their steps and nested combos, in two queries."""
    targets = ComboTarget.objects.select_related("combo_ref").order_by("position", "id")
    combos = Combo.objects.filter(is_active=True).prefetch_related(Prefetch("targets", targets))
    return {c.name: _combo_info(c, attempts) for c in combos}


def _price(value: Decimal | None) -> float | None:
    return float(value) if value is not None else None


def _catalog_entry(entry: ModelCatalogEntry) -> CatalogEntry:
    return CatalogEntry(
        provider=entry.provider_id,
        model=entry.model,
        context_window=entry.context_window,
        accepts_prefill=entry.accepts_prefill,
        time_to_first_token_ms=entry.time_to_first_token_ms,
        stream_idle_ms=entry.stream_idle_ms,
        hedge_after_ms=entry.hedge_after_ms,
        input_price_per_mtok=_price(entry.input_price_per_mtok),
        output_price_per_mtok=_price(entry.output_price_per_mtok),
        supports_tools=entry.supports_tools,
        supports_structured_output=entry.supports_structured_output,
    )


def catalog_list_snapshot() -> dict[tuple[str, str], CatalogEntry]:
    """The whole model catalog keyed by (provider slug, model), in one query."""
    return {(e.provider_id, e.model): _catalog_entry(e) for e in ModelCatalogEntry.objects.all()}


def connection_list_routable() -> dict[str, tuple[ConnectionInfo, ...]]:
    """Active connections grouped by provider, by priority then id."""
    grouped: dict[str, list[ConnectionInfo]] = defaultdict(list)
    queryset = ProviderConnection.objects.filter(is_active=True).select_related("provider")
    for connection in queryset.order_by("priority", "id"):
        grouped[connection.provider_id].append(_connection_info(connection))
    return {provider: tuple(items) for provider, items in grouped.items()}


def config_snapshot_build(
    *, version: int, remote_version: int, now: datetime | None = None
) -> ConfigSnapshot:
    """Materialise the whole routing configuration into frozen data."""
    queryset = ClientApiKey.objects.prefetch_related("allowed_connections")
    keys = {k.key_hash: _key_info(k) for k in queryset}
    providers = {p.slug: _provider_info(p) for p in Provider.objects.all()}
    resolved = settings_resolved_current()
    settings = resilience_settings_of(resolved)
    lockout = settings.model_lockout
    gates = {
        slug: window_gate_policy_for(p.category, settings, os.environ)
        for slug, p in providers.items()
    }
    restatements, error_rules = rules_for_snapshot()
    return ConfigSnapshot(
        version=version,
        remote_version=remote_version,
        providers=providers,
        connections=connection_list_routable(),
        keys_by_hash=keys,
        combos=combo_list_snapshot(resolved[ATTEMPTS]),
        breaker_policies={
            slug: breaker_policy_for(p.category, settings, os.environ)
            for slug, p in providers.items()
        },
        gate_policies={slug: gate for slug, gate in gates.items() if gate is not None},
        cooldown_profiles={  # the model lockout's maxCooldownMs caps connection cooldowns
            slug: cooldown_profile_for(p.category, settings, os.environ, lockout.max_cooldown_ms)
            for slug, p in providers.items()
        },
        restatement_rules=restatements,
        error_rules=error_rules,
        time_zone=ZoneInfo(django_settings.TIME_ZONE),
        lockout=lockout,
        availability=settings.availability,
        attempts=resolved[ATTEMPTS],
        stream_recovery=resolved[STREAM_RECOVERY],
        catalog=catalog_list_snapshot(),
        emergency_fallback=emergency_fallback_current(),
        request_queue=resolved[REQUEST_QUEUE],
        quota_share=resolved[QUOTA_SHARE],
        combo_cooldown_wait=resolved[COMBO_COOLDOWN_WAIT],
        session_affinity=resolved[SESSION_AFFINITY],
        managed_connections=managed_connection_set(keys.values(), now or timezone.now()),
    )


def emergency_fallback_current() -> dict[str, str]:
    """The emergency fallback per wire format: the admin's flag while it is on, else
    ``OMNIROUTE_EMERGENCY_FALLBACK``. A value that does not parse turns it off, loudly."""
    flag = FeatureFlag.objects.filter(name=FeatureFlag.Name.EMERGENCY_FALLBACK, enabled=True)
    text = next((f.value for f in flag), django_settings.EMERGENCY_FALLBACK)
    try:
        return parse_emergency_fallback(text)
    except ValueError as error:
        logger.error("emergency fallback %r ignored: %s", text, error)
        return {}


# A connection's live state as the admin's filter and the API's ``?state=`` name it.
COOLING, TERMINAL, LOCKED = "cooling", "terminal", "locked"
LIVE_STATES = (COOLING, TERMINAL, LOCKED)


def connections_in_live_state(
    connections: QuerySet[ProviderConnection], state: str
) -> QuerySet[ProviderConnection]:
    """``connections`` narrowed to one of :data:`LIVE_STATES` (``locked``: with a locked
    model); ``ValueError`` for any other state.

    Cooling and terminal read the store's records in one scan and ask the database only for
    the rows without a record whose own columns say so: a list of thousands of healthy
    connections costs neither a store read nor a row load per connection."""
    if state == LOCKED:
        return connections.filter(pk__in=list(lockouts_by_connection()))
    if state not in (COOLING, TERMINAL):
        raise ValueError(state)
    now = timezone.now()
    matches = _is_terminal if state == TERMINAL else _is_cooling
    recorded = async_to_sync(connection_states_recorded)(store=get_store())
    ids = {pk for pk, live in recorded.items() if matches(live, now.timestamp())}
    durable = connections.exclude(pk__in=list(recorded)).filter(
        Q(test_status__in=TERMINAL_STATUSES)
        if state == TERMINAL
        else Q(rate_limited_until__gt=now) & ~Q(test_status__in=TERMINAL_STATUSES)
    )
    ids.update(durable.values_list("pk", flat=True))
    return connections.filter(pk__in=ids)


def _is_cooling(state: ConnectionState, now: float) -> bool:
    return not state.is_terminal and state.remaining(now) > 0


def _is_terminal(state: ConnectionState, now: float) -> bool:
    return state.is_terminal
