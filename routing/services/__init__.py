"""The one write path for routing configuration. Admin, API and commands call these."""

from routing.services.catalog import catalog_entry_delete, catalog_entry_save
from routing.services.combos import combo_delete, combo_save
from routing.services.connections import (
    connection_clear_error,
    connection_delete,
    connection_is_terminal,
    connection_reset_terminal,
    connection_save,
)
from routing.services.flags import feature_flag_delete, feature_flag_save
from routing.services.keys import (
    api_key_create,
    api_key_delete,
    api_key_restore,
    api_key_revoke,
    api_key_update,
)
from routing.services.providers import provider_delete, provider_save
from routing.services.secrets import SecretRotation, secrets_rotate

__all__ = [
    "SecretRotation",
    "api_key_create",
    "api_key_delete",
    "api_key_restore",
    "api_key_revoke",
    "api_key_update",
    "catalog_entry_delete",
    "catalog_entry_save",
    "combo_delete",
    "combo_save",
    "connection_clear_error",
    "connection_delete",
    "connection_is_terminal",
    "connection_reset_terminal",
    "connection_save",
    "feature_flag_delete",
    "feature_flag_save",
    "provider_delete",
    "provider_save",
    "secrets_rotate",
]
