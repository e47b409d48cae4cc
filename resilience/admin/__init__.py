"""Django admin for resilience: the settings page, the provider breakers, the rules and the
model cooldowns."""

from resilience.admin.breakers import CircuitBreakerAdmin
from resilience.admin.lockouts import ModelCooldownAdmin
from resilience.admin.rules import ProviderErrorRuleAdmin, StatusRestatementRuleAdmin
from resilience.admin.settings import ResilienceSettingsAdmin

__all__ = [
    "CircuitBreakerAdmin",
    "ModelCooldownAdmin",
    "ProviderErrorRuleAdmin",
    "ResilienceSettingsAdmin",
    "StatusRestatementRuleAdmin",
]
