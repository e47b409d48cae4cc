"""Every admin page gives times to the second (the format module in ``omniroute/formats``)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client

from routing.models import ClientApiKey
from routing.services import api_key_create


@pytest.mark.django_db
def test_an_admin_list_shows_a_time_to_the_second(admin_client: Client) -> None:
    key, _ = api_key_create(name="times")
    moment = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    ClientApiKey.objects.filter(pk=key.pk).update(created_at=moment)
    page = admin_client.get("/admin/routing/clientapikey/").content.decode()
    assert "March 4, 2026, 05:06:07" in page
