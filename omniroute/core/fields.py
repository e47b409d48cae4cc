"""Management API serializer fields shared by the apps: inputs read as what the client meant.

``JsonBooleanField`` takes only JSON's ``true`` and ``false`` (and, from a form body, the words
``true`` and ``false``). DRF's own boolean field also reads ``"yes"``, ``"on"``, ``1`` and their
kin as true: lenient for a setting, but a flag that widens a destructive call (``{"all": true}``
clears every lock or breaker) must not be set by a value the client did not mean as a boolean
(docs/operating.md, "The management API").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

__all__ = ["JsonBooleanField", "RelatedListField"]


class JsonBooleanField(serializers.BooleanField):
    """A boolean the body states as a JSON boolean: anything else is the field's 400."""

    default_error_messages = {"invalid": "Must be true or false (a JSON boolean)."}

    def to_internal_value(self, data: Any) -> bool:
        if data is True or data is False:
            return bool(data)
        if data in ("true", "false"):  # a form body's text
            return data == "true"
        self.fail("invalid")
        raise AssertionError("unreachable")  # fail() raises


class RelatedListField(serializers.ManyRelatedField):
    """A list of related rows' ids. DRF's own takes any iterable, so an object such as
    ``{}`` read as an empty list (clearing a key's restriction) and ``{"5": true}`` as ``[5]``:
    an object is the field's 400 here, as for any list field."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            self.fail("not_a_list", input_type=type(data).__name__)
        return super().to_internal_value(data)
