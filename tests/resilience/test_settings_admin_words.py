"""The resilience settings page in words (issue 14): grouped under headings, labelled and
explained in plain words, the API's dotted name still given in each help text."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from omniroute.core.settings import SETTINGS
from resilience.admin.settings import field_name
from resilience.admin.settings_text import label_for

PAGE = reverse("admin:resilience_resiliencesettings_change", args=[1])
# Every section's words, whichever app declares it.
FIELDS = {path: words for section in SETTINGS for path, words in section.words.items()}
GROUPS = {group: words for section in SETTINGS for group, words in section.headings.items()}


def test_every_setting_group_and_section_has_words() -> None:
    groups = {path.rsplit(".", 1)[0] for path in SETTINGS.schema.fields}
    groups |= {section.name for section in SETTINGS}  # each section's collapsible part

    assert set(SETTINGS.schema.fields) <= set(FIELDS), set(SETTINGS.schema.fields) - set(FIELDS)
    assert groups <= set(GROUPS), groups - set(GROUPS)
    assert all(label and help_text for label, help_text in FIELDS.values())


def test_an_unknown_setting_gets_a_label_in_words() -> None:
    assert label_for("future.maxWaitMs") == "Max wait (ms)"


@pytest.mark.django_db
def test_the_page_shows_group_headings_labels_and_help(staff_client: Client) -> None:
    response = staff_client.get(PAGE)

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h2>Provider circuit breaker</h2>" in page  # a section, then its groups
    assert "Provider circuit breaker: sign-in (OAuth) providers</h3>" in page
    assert "<h2>Model lockout</h2>" in page and "<h2>Retries and timeouts</h2>" in page
    assert "when a provider keeps failing" in page.lower()  # a group's description
    form = response.context["adminform"].form
    field = form.fields[field_name("modelLockout.baseCooldownMs")]
    assert field.label == "First lock duration (ms)"
    assert field.help_text == (
        "How long a model stays locked after its first failure. "
        "Allowed: from 5,000 to 600,000. API name: modelLockout.baseCooldownMs."
    )
    assert ">First lock duration (ms)" in page and "modelLockout.baseCooldownMs." in page
    sections = {section.name: section.heading for section in response.context["settings_sections"]}
    assert sections["sessionAffinity"] == "Session affinity"
