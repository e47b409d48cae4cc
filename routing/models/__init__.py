"""Operator objects of the routing app: providers, connections, client keys, combos and the model
catalog, feature flags, and the durable copy of session-affinity pins."""

from routing.models.affinity import SessionAffinityPin
from routing.models.catalog import ModelCatalogEntry
from routing.models.combos import Combo, ComboTarget
from routing.models.flags import FeatureFlag
from routing.models.keys import ClientApiKey
from routing.models.providers import Provider, ProviderConnection
from routing.models.proxy_log import ProxyLog

__all__ = [
    "ClientApiKey",
    "Combo",
    "ComboTarget",
    "FeatureFlag",
    "ModelCatalogEntry",
    "Provider",
    "ProviderConnection",
    "ProxyLog",
    "SessionAffinityPin",
]
