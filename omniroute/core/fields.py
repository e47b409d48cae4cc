"""Management API serializer fields shared by the apps.

``JsonBooleanField`` takes only JSON's ``true`` and ``false`` (and, from a form body, the words
``true`` and ``false``). DRF's own boolean field also reads ``"yes"``, ``"on"``, ``1`` and their
kin as true: lenient for a setting, but a flag that widens a destructive call (``{"all": true}``
clears every lock or breaker) must not be set by a value the client did not mean as a boolean
(docs/operating.md, "The management API").
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

__all__ = ["JsonBooleanField"]


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
