"""A proxy consumer (one per request) reads its starting values from its class
(``routing.proxy.shell.ProxyConsumer``): they must be values no request can change in place, or
one request's change would be every later request's start."""

from __future__ import annotations

import inspect

import pytest

from routing.proxy.consumers import RelayConsumer
from routing.proxy.shell import ProxyConsumer


@pytest.mark.parametrize("consumer", [ProxyConsumer, RelayConsumer])
def test_every_starting_value_on_the_class_is_immutable(consumer: type) -> None:
    values = {
        name: value
        for name, value in vars(consumer).items()
        if not name.startswith("__")
        and not inspect.isroutine(value)
        and not isinstance(value, property | classmethod | staticmethod)
    }

    assert "status" in values or consumer is RelayConsumer  # the check sees the values
    for name, value in values.items():
        assert not isinstance(value, list | dict | set | bytearray), name  # changed in place
        params = getattr(type(value), "__dataclass_params__", None)
        assert params is None or params.frozen, name


def test_two_requests_start_alike_whatever_the_first_one_set() -> None:
    first, second = ProxyConsumer(), ProxyConsumer()
    first.status, first.recorded, first.key_prefix = 502, True, "sk-omr-abc"

    assert (second.status, second.recorded, second.key_prefix) == (0, False, "-")
    assert first.request_id != second.request_id
