"""The request log's admin: a read-only list that finds a request, and its page with the
decision trail as a timeline."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from omniroute.core.observability.requestlog.models import RequestLogEntry
from omniroute.core.observability.requestlog.record import RequestRecord, StepKind, TrailStep
from omniroute.core.observability.requestlog.services import request_log_write

pytestmark = pytest.mark.django_db

LIST = "/admin/requestlog/requestlogentry/"
TRAIL = (
    TrailStep(StepKind.SKIPPED, "acme/m", 1, "circuit_open", detail="for 30s (self)"),
    TrailStep(StepKind.TRIED, "acme/m", 2, "http_error", 503, 12, "HTTP 503"),
    TrailStep(StepKind.TRIED, "acme/m", 3, "success", 200, 30),
)


@pytest.fixture
def failed_over() -> RequestLogEntry:
    record = RequestRecord(
        "0123456789abcdef01234567",
        time.time(),
        "/v1/chat/completions",
        200,
        42,
        key_name="team-a",
        key_prefix="sk-or-ab",
        model="acme/m",
        provider="acme",
        target_model="m",
        connection_id=3,
        connection_name="third",
        attempts=2,
        trail=TRAIL,
    )
    failed = RequestRecord("ffff", time.time() - 5, "/v1/messages", 502, 9, error_code="oops")
    request_log_write(records=[record, failed])
    return RequestLogEntry.objects.get(request_id=record.request_id)


def test_the_list_shows_status_badges_and_finds_a_request_by_its_id(
    admin_client: Client, failed_over: RequestLogEntry
) -> None:
    page = admin_client.get(LIST).content.decode()
    assert 'state-badge--ok">200' in page
    assert 'state-badge--bad" title="oops">502' in page

    found = admin_client.get(LIST, {"q": failed_over.request_id}).content.decode()

    assert "0123456789ab" in found and "/v1/messages" not in found and "oops" not in found
    assert "/add/" not in found


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ({"model": "acme/m"}, "0123456789ab"),
        ({"key": "team-a"}, "0123456789ab"),
        ({"provider": "acme"}, "0123456789ab"),
        ({"status__exact": "502"}, "ffff"),
    ],
)
def test_the_list_filters_by_key_model_provider_and_status(
    admin_client: Client, failed_over: RequestLogEntry, query: dict[str, str], shown: str
) -> None:
    page = admin_client.get(LIST, query).content.decode()

    rows = page[page.index('id="result_list"') :]
    assert rows.count("<tr") == 2  # the head and one row
    assert shown in rows


def test_a_requests_page_shows_its_trail_in_order_and_offers_no_change(
    admin_client: Client, failed_over: RequestLogEntry
) -> None:
    response = admin_client.get(f"{LIST}{failed_over.pk}/change/")

    page = response.content.decode()
    assert response.status_code == 200
    timeline = page[page.index('<ol class="request-trail">') :]
    order = [timeline.index(text) for text in ("circuit_open", "HTTP 503", "success")]
    assert order == sorted(order)
    assert "acme/m @ third" in page  # what answered: the provider, model and connection
    assert 'name="_save"' not in page
    assert admin_client.get(f"{LIST}add/").status_code == 403


def test_a_request_id_leads_to_its_page_or_to_the_list_searched_for_it(
    admin_client: Client, failed_over: RequestLogEntry
) -> None:
    page = admin_client.get(f"{LIST}request/{failed_over.request_id}/")
    assert (page.status_code, page["location"]) == (302, f"{LIST}{failed_over.pk}/change/")

    missing = admin_client.get(f"{LIST}request/abc123/", follow=True)
    assert missing.redirect_chain == [(f"{LIST}?q=abc123", 302)]
    assert "Request abc123 is not in the request log" in missing.content.decode()
