from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

import routing.domain.settings.sections  # noqa: F401  registers routing's settings sections

if TYPE_CHECKING:
    from resilience.hooks import HealthPolicies


async def health_policies() -> HealthPolicies:
    """The configured breaker policies, as the health payload reports them."""
    from resilience.hooks import HealthPolicies
    from routing.snapshot import current_snapshot

    snapshot = await current_snapshot()
    return HealthPolicies(
        breakers=snapshot.breaker_policies,
        default=snapshot.breaker_policy(""),
        window_gate_enabled=bool(snapshot.gate_policies),
    )


def install_for_leases() -> None:
    """Hand leases what its lease API needs of routing (the key a request presents, a model's
    candidate connections, their live state): leases never imports routing."""
    from routing.lease_access import install_lease_access

    install_lease_access()


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Routing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Hand resilience what routing owns, in one object: resilience never imports routing
        (the layers point one way), so the connection names, the expired re-check pass, the
        write of a connection's state to its row, the breaker policies and admission counts
        health reports and the session-affinity pins to restore with the breakers come in
        here (see ``resilience.hooks``)."""
        from omniroute.core.observability.metrics import register_state
        from resilience.hooks import DurableState, RoutingHooks, install_hooks
        from routing.metrics import ProviderCollector
        from routing.proxy.guards.admission import admission_stats
        from routing.selectors import connection_names
        from routing.services.affinity import affinity_pins_restore, affinity_pins_sweep
        from routing.services.connections import connection_state_write
        from routing.services.expired import expired_recheck_pass_now

        pins = DurableState(
            "session affinity pins", restore=affinity_pins_restore, sweep=affinity_pins_sweep
        )
        install_hooks(
            RoutingHooks(
                connection_names=connection_names,
                expired_recheck=expired_recheck_pass_now,
                connection_writer=connection_state_write,
                health_policies=health_policies,
                admission_stats=admission_stats,
                durable_states=(pins,),
            )
        )
        install_for_leases()  # leases' access to routing, apart from resilience's hooks
        register_state("providers", ProviderCollector())  # the per-provider gauges of /metrics
