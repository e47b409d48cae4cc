from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from resilience.api.health import HealthPolicies


async def health_policies() -> HealthPolicies:
    """The configured breaker policies, as the health payload reports them."""
    from resilience.api.health import HealthPolicies
    from routing.snapshot import current_snapshot

    snapshot = await current_snapshot()
    return HealthPolicies(
        breakers=snapshot.breaker_policies,
        default=snapshot.breaker_policy(""),
        window_gate_enabled=bool(snapshot.gate_policies),
    )


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Routing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Hand resilience what routing owns: resilience never imports routing (the layers
        point one way), so the connection names, the expired re-check pass, the write of a
        connection's state to its row, the breaker policies health reports and the session
        affinity pins to restore with the breakers come in here."""
        from resilience.api.health import set_admission_source, set_policy_source
        from resilience.persistence import register_connection_writer
        from resilience.services.housekeeping import (
            register_durable_state,
            register_expired_recheck,
        )
        from resilience.services.lockout_operations import register_connection_names
        from routing.guards.admission import admission_stats
        from routing.selectors import connection_names
        from routing.services.affinity import affinity_pins_restore, affinity_pins_sweep
        from routing.services.connections import connection_state_write
        from routing.services.expired import expired_recheck_pass_now

        register_connection_names(connection_names)
        register_expired_recheck(expired_recheck_pass_now)
        register_connection_writer(connection_state_write)
        set_policy_source(health_policies)
        set_admission_source(admission_stats)
        register_durable_state(
            "session affinity pins", restore=affinity_pins_restore, sweep=affinity_pins_sweep
        )
