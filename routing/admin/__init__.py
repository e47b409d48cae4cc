"""Django admin for the routing configuration, one module per noun.

Every save, delete and verb calls ``routing.services`` (the same functions as the API); state
fields are read-only and change only through actions. Secrets are write-only here too: the
forms never render them and pages show at most the masked preview.
"""

from __future__ import annotations

from routing.admin.affinity import SessionAffinityPinAdmin
from routing.admin.catalog import ModelCatalogEntryAdmin
from routing.admin.combos import ComboAdmin
from routing.admin.connections import ProviderConnectionAdmin
from routing.admin.flags import FeatureFlagAdmin
from routing.admin.keys import ClientApiKeyAdmin
from routing.admin.providers import ProviderAdmin

__all__ = [
    "ClientApiKeyAdmin",
    "ComboAdmin",
    "FeatureFlagAdmin",
    "ModelCatalogEntryAdmin",
    "ProviderAdmin",
    "ProviderConnectionAdmin",
    "SessionAffinityPinAdmin",
]
