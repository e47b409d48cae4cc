"""Routing hands resilience what it owns at start-up (resilience never imports routing)."""

from __future__ import annotations

import pytest
from pytest_django import DjangoAssertNumQueries

from resilience.hooks import hooks
from routing.models import ProviderConnection
from routing.selectors import connection_names
from routing.services.expired import expired_recheck_pass_now


def test_the_expired_recheck_pass_is_registered_with_the_housekeeping() -> None:
    assert hooks().expired_recheck is expired_recheck_pass_now


def test_connection_names_are_registered_for_the_lockout_pages() -> None:
    assert hooks().connection_names is connection_names


@pytest.mark.django_db
def test_connection_names_answers_in_one_query(
    connection: ProviderConnection, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    with django_assert_num_queries(1):
        names = connection_names({connection.pk, 999_999})

    assert names == {connection.pk: "primary"}
