"""The routing vocabulary shared by models, APIs and the proxy (pure: no Django import).

Enums live here, in the domain; model ``choices`` derive from them, never the reverse.
"""

from __future__ import annotations

from enum import StrEnum

from resilience.domain.connection_state import TERMINAL, TestStatus

__all__ = ["TERMINAL_STATUSES", "TestStatus"]


class ProviderCategory(StrEnum):
    """Auth category of a provider; picks the breaker/cooldown profile."""

    OAUTH = "oauth"
    API_KEY = "api_key"
    LOCAL = "local"


class WireFormat(StrEnum):
    """The request/response format a provider speaks."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"


class AuthType(StrEnum):
    """How a connection authenticates upstream."""

    API_KEY = "api_key"
    OAUTH = "oauth"
    NONE = "none"


# A connection's statuses are the resilience layer's (defined once, there).
TERMINAL_STATUSES = TERMINAL


class Prefill(StrEnum):
    """Whether a model continues a partial assistant message (a model-catalog entry's
    ``accepts_prefill``). A stream cut after commit is completed by prefill continuation only on
    ``yes``; on ``no`` and ``unknown`` it is regenerated and spliced on the exact prefix."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


class Scope(StrEnum):
    """Scopes a client API key can carry."""

    MANAGE = "manage"
    LEASE_EXCLUSIVE = "lease:exclusive"


class Strategy(StrEnum):
    """The combo strategies of the reference (part 2, section 7.2)."""

    PRIORITY = "priority"
    WEIGHTED = "weighted"
    ROUND_ROBIN = "round-robin"
    CONTEXT_RELAY = "context-relay"
    FILL_FIRST = "fill-first"
    P2C = "p2c"
    RANDOM = "random"
    LEAST_USED = "least-used"
    COST_OPTIMIZED = "cost-optimized"
    RESET_AWARE = "reset-aware"
    RESET_WINDOW = "reset-window"
    HEADROOM = "headroom"
    STRICT_RANDOM = "strict-random"
    AUTO = "auto"
    LKGP = "lkgp"
    CONTEXT_OPTIMIZED = "context-optimized"
    CACHE_OPTIMIZED = "cache-optimized"
    FUSION = "fusion"
    PIPELINE = "pipeline"
    QUOTA_SHARE = "quota-share"  # the reference's internal strategy, open to operators


class ExclusionReason(StrEnum):
    """Why the attempt loop skipped a target without trying it."""

    CIRCUIT_OPEN = "circuit_open"
    PROVIDER_COOLDOWN = "provider_cooldown"
    CONNECTION_COOLDOWN = "connection_cooldown"
    MODEL_LOCKOUT = "model_lockout"
    UNAVAILABLE = "unavailable"
    TOOL_LIMIT = "tool_limit"  # the request declares more tools than the target takes
    FALLBACK_ONLY = "fallback_only"  # a priority step kept for when quota runs out earlier
    LEASE_BOUND = "lease_bound"  # a lease stays on its connection after the client's mistake
