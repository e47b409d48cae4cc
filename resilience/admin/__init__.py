"""Django admin for resilience: the settings page, the provider breakers and the rules."""

from resilience.admin.breakers import CircuitBreakerAdmin
from resilience.admin.rules import ProviderErrorRuleAdmin, StatusRestatementRuleAdmin
from resilience.admin.settings import ResilienceSettingsAdmin

__all__ = [
    "CircuitBreakerAdmin",
    "ProviderErrorRuleAdmin",
    "ResilienceSettingsAdmin",
    "StatusRestatementRuleAdmin",
]
