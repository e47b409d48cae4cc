"""A connection's rate-limit overrides (routing/domain/quota/rate_limits.py): each integer key is
bounded at write, and a stored value out of bounds is read as the default, so a thousand-digit
integer never reaches the limiter's arithmetic (docs/routing.md, "Admission")."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from routing.domain.quota.rate_limits import (
    INT_BOUNDS,
    NO_OVERRIDES,
    check_overrides,
    read_overrides,
)
from routing.models import ProviderConnection
from tests.routing.api_support import error_fields

HUGE = 10**400


@pytest.mark.parametrize("key", sorted(INT_BOUNDS))
def test_each_integer_key_is_bounded(key: str) -> None:
    assert check_overrides({key: 0}) == []
    assert check_overrides({key: INT_BOUNDS[key]}) == []
    for wrong in (-1, INT_BOUNDS[key] + 1, HUGE, 1.5, True, "10"):
        assert check_overrides({key: wrong}) == [f"{key}: must be an integer 0..{INT_BOUNDS[key]}"]


def test_a_stored_value_out_of_bounds_is_read_as_the_default() -> None:
    stored = {"rpm": HUGE, "minTime": HUGE, "maxConcurrent": HUGE, "maxWaitMs": HUGE}
    assert read_overrides(stored) == NO_OVERRIDES
    assert read_overrides({"rpm": 60, "maxWaitMs": 30_001}).rpm == 60
    assert read_overrides({"rpm": 60, "maxWaitMs": 30_001}).max_wait_ms == 0


@pytest.mark.django_db
def test_the_api_refuses_it_on_the_field(
    manage_client: APIClient, connection: ProviderConnection
) -> None:
    response = manage_client.patch(
        f"/api/connections/{connection.pk}/",
        {"rate_limit_protection": True, "rate_limit_overrides": {"maxWaitMs": HUGE}},
        format="json",
    )

    assert "rate_limit_overrides" in error_fields(response)
    assert ProviderConnection.objects.get(pk=connection.pk).rate_limit_overrides == {}
