"""Session affinity's one number (the ``sessionAffinity`` settings
section), pure. Routing keeps a client session on the provider account that last answered it
(``routing.proxy.affinity``); this is only how long that lasts."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TTL_MS = 86_400_000  # one day

TTL_HELP = (
    "How long a client session stays on the provider account that last answered it, counted "
    "from the session's latest request (in milliseconds). A session is named by the "
    "X-Session-Id, x-codex-session-id or x-omniroute-session header, a session field of the "
    "request body, or else its first message. It applies to every provider; an account that "
    "fails or cools down loses its sessions to the next one. 0 turns session affinity off."
)


@dataclass(frozen=True, slots=True)
class SessionAffinitySettings:
    """The ``sessionAffinity`` section: ``ttl_ms`` 0 (off) to one day, sliding."""

    ttl_ms: int = 0

    @property
    def enabled(self) -> bool:
        return self.ttl_ms > 0

    @property
    def ttl_seconds(self) -> float:
        return self.ttl_ms / 1000
