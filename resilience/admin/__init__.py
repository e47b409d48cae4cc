"""Django admin for resilience: the settings page and the provider breakers."""

from resilience.admin.breakers import CircuitBreakerAdmin
from resilience.admin.settings import ResilienceSettingsAdmin

__all__ = ["CircuitBreakerAdmin", "ResilienceSettingsAdmin"]
