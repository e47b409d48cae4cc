"""The in-process configuration snapshot the hot path reads (pure frozen data).

Built from the database by ``routing.selectors.config_snapshot_build`` and replaced whole when
the configuration version changes; nothing lazy, nothing that can query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from enum import StrEnum
from urllib.parse import urlsplit

from resilience.domain.attempts.cooldown_wait import ComboCooldownWaitSettings
from resilience.domain.attempts.policy import AttemptPolicy
from resilience.domain.attempts.stream_recovery import StreamRecoverySettings
from resilience.domain.availability import AvailabilitySettings
from resilience.domain.breaker.machine import BreakerPolicy
from resilience.domain.classify.classifier import CooldownProfile
from resilience.domain.connection_state import ConnectionState
from resilience.domain.lockout import LockoutSettings
from resilience.domain.request_queue import RequestQueueSettings
from resilience.domain.rules import ErrorRule, RestatementRule
from resilience.domain.window_gate import WindowGatePolicy
from routing.domain.config.combo_options import DEFAULT_OPTIONS, ComboOptions
from routing.domain.config.keys import key_is_usable, model_is_allowed
from routing.domain.config.vocabulary import Prefill, Scope
from routing.domain.quota.rate_limits import NO_OVERRIDES, RateLimitOverrides
from routing.domain.settings.quota_share import QuotaShareSettings
from routing.domain.settings.session_affinity import SessionAffinitySettings


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """What routing needs of a provider."""

    slug: str
    name: str
    category: str
    base_url: str
    wire_format: str
    full_text_rules: bool = False
    honors_rule_scope: bool = False
    egress_bucketed_lock: bool = False
    per_model_quota: bool = True
    max_concurrent: int | None = None  # over all its connections


DIRECT_EGRESS = "direct"


class Unsendable(StrEnum):
    """What of a connection's stored row the upstream client cannot send: one stored before it
    was checked when saved. Its attempts end in the gateway (docs/operating.md)."""

    NOTHING = ""
    SECRET = "secret"
    BASE_URL = "base URL"
    PROXY_URL = "outbound proxy URL"


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What routing needs of a connection, with its secret decrypted."""

    id: int
    provider: str
    name: str
    priority: int
    base_url: str
    auth_type: str
    secret: str | None = field(default=None, repr=False)
    unsendable: Unsendable = Unsendable.NOTHING
    served_models: tuple[str, ...] = ()
    max_concurrent: int | None = None
    rate_limit_protection: bool = False
    overrides: RateLimitOverrides = NO_OVERRIDES
    state: ConnectionState = field(default_factory=ConnectionState)  # as the database had it
    disable_cooling: bool = False
    proxy_url: str = ""

    @property
    def egress(self) -> str:
        """The egress identity: the connection's outbound proxy (without its credentials), or
        the gateway host itself."""
        if not self.proxy_url:
            return DIRECT_EGRESS
        parts = urlsplit(self.proxy_url)
        return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}".rstrip(":")

    def serves(self, model: str) -> bool:
        return not self.served_models or model in self.served_models


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """A client key as the proxy checks it."""

    id: int
    name: str
    prefix: str
    scopes: frozenset[str]
    allowed_models: tuple[str, ...]
    allowed_connections: frozenset[int]
    is_active: bool
    expires_at: datetime | None
    revoked_at: datetime | None

    def is_usable(self, now: datetime) -> bool:
        return key_is_usable(
            is_active=self.is_active,
            revoked_at=self.revoked_at,
            expires_at=self.expires_at,
            now=now,
        )

    def allows_model(self, model: str) -> bool:
        return model_is_allowed(model, self.allowed_models)

    def allows_connection(self, connection_id: int) -> bool:
        return not self.allowed_connections or connection_id in self.allowed_connections

    @property
    def is_managed(self) -> bool:
        """Whether the key holds exclusive session leases (``lease:exclusive``): its requests
        run on the connection their lease binds, fenced by the lease's generation."""
        return Scope.LEASE_EXCLUSIVE in self.scopes


def managed_connection_set(keys: Iterable[KeyInfo], now: datetime) -> frozenset[int]:
    """The connections reserved for exclusive session leases: the union
    of the allow-lists of the keys with ``lease:exclusive`` that are usable at ``now``. A key
    that expires later leaves the set at the next snapshot rebuild."""
    return frozenset(
        connection
        for key in keys
        if key.is_managed and key.is_usable(now)
        for connection in key.allowed_connections
    )


@dataclass(frozen=True, slots=True)
class ComboStep:
    """One declared combo target: ``provider/model`` (the model may be a glob such as
    ``gpt-4*``), optionally pinned to a connection; or, with ``combo_ref``, another combo whose
    targets stand in this step's place (``provider`` and ``model`` are then empty)."""

    provider: str
    model: str
    connection_id: int | None = None
    weight: int = 1
    combo_ref: str | None = None  # the nested combo's name
    fallback_only_on_quota_exhaustion: bool = False  # tried only after quota failures before it


@dataclass(frozen=True, slots=True)
class ComboInfo:
    """A combo with its ordered steps and its strategy's options."""

    name: str
    strategy: str
    steps: tuple[ComboStep, ...]
    attempts: AttemptPolicy | None = None  # the global policy with the combo's overrides
    options: ComboOptions = DEFAULT_OPTIONS


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A model-catalog entry: one model at one provider (``None``: unknown, or follow the
    global ``attempts`` settings for the two time limits and the hedge delay)."""

    provider: str
    model: str
    context_window: int | None = None
    accepts_prefill: str = Prefill.UNKNOWN  # a ``Prefill`` value
    time_to_first_token_ms: int | None = None
    stream_idle_ms: int | None = None
    hedge_after_ms: int | None = None  # 0: never hedge this model
    input_price_per_mtok: float | None = None  # USD per million tokens
    output_price_per_mtok: float | None = None
    supports_tools: bool | None = None
    supports_structured_output: bool | None = None


DEFAULT_BREAKER_POLICY = BreakerPolicy()
DEFAULT_COOLDOWN_PROFILE = CooldownProfile(
    base_cooldown_ms=3_000, use_upstream_retry_hints=True, max_backoff_steps=5
)


@dataclass(frozen=True, slots=True)
class ConfigSnapshot:
    """Everything the proxy reads per request, immutable."""

    version: int = 0
    remote_version: int = 0
    providers: dict[str, ProviderInfo] = field(default_factory=dict)
    connections: dict[str, tuple[ConnectionInfo, ...]] = field(default_factory=dict)
    keys_by_hash: dict[str, KeyInfo] = field(default_factory=dict)
    combos: dict[str, ComboInfo] = field(default_factory=dict)
    breaker_policies: dict[str, BreakerPolicy] = field(default_factory=dict)
    gate_policies: dict[str, WindowGatePolicy] = field(default_factory=dict)
    cooldown_profiles: dict[str, CooldownProfile] = field(default_factory=dict)
    restatement_rules: dict[str, tuple[RestatementRule, ...]] = field(default_factory=dict)
    error_rules: dict[str, tuple[ErrorRule, ...]] = field(default_factory=dict)
    time_zone: tzinfo = UTC
    lockout: LockoutSettings = field(default_factory=LockoutSettings)
    availability: AvailabilitySettings = field(default_factory=AvailabilitySettings)
    attempts: AttemptPolicy = field(default_factory=AttemptPolicy)
    stream_recovery: StreamRecoverySettings = field(default_factory=StreamRecoverySettings)
    catalog: dict[tuple[str, str], CatalogEntry] = field(default_factory=dict)
    emergency_fallback: dict[str, str] = field(default_factory=dict)  # by wire format
    request_queue: RequestQueueSettings = field(default_factory=RequestQueueSettings)
    quota_share: QuotaShareSettings = field(default_factory=QuotaShareSettings)
    combo_cooldown_wait: ComboCooldownWaitSettings = field(
        default_factory=ComboCooldownWaitSettings
    )
    session_affinity: SessionAffinitySettings = field(default_factory=SessionAffinitySettings)
    # The connections that usable managed keys may use: kept out of every ordinary key's pool.
    managed_connections: frozenset[int] = frozenset()

    def key_may_use(self, key: KeyInfo, connection_id: int) -> bool:
        """Whether ``key`` may be routed to a connection: its allow-list permits it, and a
        connection reserved for exclusive session leases serves managed keys only
        (managed connections leave the ordinary pools)."""
        if not key.allows_connection(connection_id):
            return False
        return key.is_managed or connection_id not in self.managed_connections

    def cooldown_profile(self, provider: str) -> CooldownProfile:
        """The provider's connection-cooldown profile."""
        return self.cooldown_profiles.get(provider) or DEFAULT_COOLDOWN_PROFILE

    def breaker_policy(self, provider: str) -> BreakerPolicy:
        """The provider's breaker policy (its profile with the operator's settings)."""
        return self.breaker_policies.get(provider) or DEFAULT_BREAKER_POLICY

    def window_gate_policy(self, provider: str) -> WindowGatePolicy | None:
        """The provider's window-gate policy, or ``None`` while the gate is off."""
        return self.gate_policies.get(provider)

    def connections_for(self, provider: str) -> tuple[ConnectionInfo, ...]:
        """A provider's active connections, by priority (lower first)."""
        return self.connections.get(provider, ())

    def catalog_entry(self, provider: str, model: str) -> CatalogEntry | None:
        """The catalog's entry for ``model`` at ``provider``, if the operator has one."""
        return self.catalog.get((provider, model))

    def attempt_policy(self, combo: str | None) -> AttemptPolicy:
        """The attempt policy of a request for ``combo`` (``None``: not a combo): the combo's
        own when it overrides any ``attempts`` key, else the global one."""
        info = self.combos.get(combo) if combo is not None else None
        return info.attempts if info is not None and info.attempts is not None else self.attempts
