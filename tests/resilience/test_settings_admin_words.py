"""The resilience settings page in words (issue 14): grouped under headings, labelled and
explained without the spec files, the API's dotted name still given in each help text."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from resilience.admin.settings import field_name
from resilience.admin.settings_text import FIELDS, GROUPS, label_for
from resilience.domain.settings import SCHEMA

PAGE = reverse("admin:resilience_resiliencesettings_change", args=[1])


def test_every_setting_and_group_has_words() -> None:
    groups = {path.rsplit(".", 1)[0] for path in SCHEMA}

    assert set(SCHEMA) <= set(FIELDS), set(SCHEMA) - set(FIELDS)
    assert groups <= set(GROUPS), groups - set(GROUPS)
    assert all(label and help_text for label, help_text in FIELDS.values())


def test_an_unknown_setting_gets_a_label_in_words() -> None:
    assert label_for("future.maxWaitMs") == "Max wait (ms)"


@pytest.mark.django_db
def test_the_page_shows_group_headings_labels_and_help(staff_client: Client) -> None:
    response = staff_client.get(PAGE)

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h2" in page and "Provider circuit breaker: sign-in (OAuth) providers</h2>" in page
    assert "Model lockout</h2>" in page and "Retries and timeouts</h2>" in page
    assert "when a provider keeps failing" in page.lower()  # a group's description
    form = response.context["adminform"].form
    field = form.fields[field_name("modelLockout.baseCooldownMs")]
    assert field.label == "First lock duration (ms)"
    assert field.help_text == (
        "How long a model stays locked after its first failure. "
        "Allowed: from 5,000 to 600,000. API name: modelLockout.baseCooldownMs."
    )
    assert ">First lock duration (ms)" in page and "modelLockout.baseCooldownMs." in page
    headings = [fieldset.name for fieldset in response.context["adminform"]]
    assert "Session affinity" in headings and "sessionAffinity" not in headings
