"""The admin index's health line: open breakers, cooling and terminal connections, locked
models and active leases. Each is counted by the service or selector that owns it (read only:
nothing here writes), and links to the list that shows those rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.urls import reverse

from leases.interface import lease_list_active
from omniroute.core.admin import Tone
from omniroute.core.state import get_store
from resilience.domain.breaker.machine import BreakerState
from resilience.services.breakers import breaker_list
from resilience.services.lockout_operations import lockouts_active
from routing.models import ProviderConnection
from routing.selectors import COOLING, TERMINAL, connections_in_live_state

LEASES_COUNTED = 200  # more active leases than this read "200+" (the selector's own limit)


@dataclass(frozen=True, slots=True)
class HealthCount:
    """One figure of the line: "3 open breakers", linking to those breakers."""

    count: int
    label: str
    url: str
    tone: str  # the figure's colour when it is not zero
    more: bool = False  # the count stopped at a limit: there are at least this many

    @property
    def shown(self) -> str:
        return f"{self.count}+" if self.more else str(self.count)


def _changelist(name: str, **query: str) -> str:
    url = reverse(f"admin:{name}_changelist")
    return f"{url}?{urlencode(query)}" if query else url


def _open_breakers() -> HealthCount:
    breakers = async_to_sync(breaker_list)(store=get_store())
    count = sum(breaker.state == BreakerState.OPEN for breaker in breakers.values())
    url = _changelist("resilience_circuitbreaker", state__exact=BreakerState.OPEN.value)
    return HealthCount(count, "open breakers", url, Tone.BAD)


def _connections(now: datetime) -> list[HealthCount]:
    """The counts the connection list's live-state filter shows (the same selector)."""
    rows, url = ProviderConnection.objects.all(), "routing_providerconnection"

    def count(state: str) -> int:
        return connections_in_live_state(rows, state).count()

    return [
        HealthCount(
            count(COOLING), "cooling connections", _changelist(url, state=COOLING), Tone.WARN
        ),
        HealthCount(
            count(TERMINAL), "terminal connections", _changelist(url, state=TERMINAL), Tone.BAD
        ),
    ]


def _locked_models() -> HealthCount:
    url = _changelist("resilience_modelcooldown")
    return HealthCount(len(lockouts_active()), "locked models", url, Tone.WARN)


def _active_leases(now: datetime) -> HealthCount:
    """Unexpired active leases. Their list, filtered on the ACTIVE state (named as the lease
    table stores it: routing reaches leases only through ``leases.interface``), may also show
    a lease past its expiry that no lease operation has ended yet; its badge says "expired"."""
    leases = lease_list_active(now=now, limit=LEASES_COUNTED + 1)
    url = _changelist("leases_exclusiveconnectionlease", state__exact="ACTIVE")
    more = len(leases) > LEASES_COUNTED
    return HealthCount(min(len(leases), LEASES_COUNTED), "active leases", url, Tone.OK, more)


def health_summary(now: datetime) -> list[HealthCount]:
    """The line's figures, in the order an operator looks: what is down, then what waits."""
    return [_open_breakers(), *_connections(now), _locked_models(), _active_leases(now)]
