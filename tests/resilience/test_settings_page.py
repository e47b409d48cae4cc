"""The settings page in collapsible sections: closed unless a section holds a value that
differs from its default (or a field with an error), each changed value marked with its default;
the retired ``modelLockout.enabled`` is not on it."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from omniroute.core.settings import SETTINGS, flatten
from resilience.admin.settings import field_name
from resilience.services import resilience_settings_document, resilience_settings_update

pytestmark = pytest.mark.django_db

PAGE = reverse("admin:resilience_resiliencesettings_change", args=[1])
SECTION = re.compile(r'<details class="settings-section"[^>]*data-section="(\w+)"([^>]*)>')
MARKER = re.compile(r'<strong class="changed-from-default" data-path="([\w.]+)">([^<]*)</strong>')


def _open_sections(page: str) -> dict[str, bool]:
    """Every section on the page and whether it starts open."""
    return {name: " open" in rest for name, rest in SECTION.findall(page)}


def _input(page: str, path: str) -> str:
    """The ``<input>`` tag of a setting."""
    found = re.search(rf'<input[^>]*name="{field_name(path)}"[^>]*>', page)
    assert found is not None
    return found.group(0)


def _page(client: Client) -> str:
    response = client.get(PAGE)
    assert response.status_code == 200
    return str(response.content.decode())


def test_with_nothing_changed_every_section_is_closed_and_nothing_marked(
    staff_client: Client,
) -> None:
    page = _page(staff_client)

    sections = _open_sections(page)
    assert list(sections) == [section.name for section in SETTINGS]
    assert not any(sections.values())
    assert MARKER.findall(page) == []
    assert "modelLockout.enabled" not in page and field_name("modelLockout.enabled") not in page


def test_a_changed_value_is_marked_with_its_default_and_its_section_open(
    staff_client: Client,
) -> None:
    resilience_settings_update(patch={"modelLockout": {"maxBackoffSteps": 4}})

    page = _page(staff_client)

    sections = _open_sections(page)
    assert sections["modelLockout"] is True
    assert [name for name, shown in sections.items() if shown] == ["modelLockout"]
    assert MARKER.findall(page) == [("modelLockout.maxBackoffSteps", "Changed; the default is 10.")]
    assert "1 changed from the default" in page
    assert 'class="changed-from-default"' in _input(page, "modelLockout.maxBackoffSteps")
    assert 'class="changed-from-default"' not in _input(page, "modelLockout.baseCooldownMs")
    assert "modelLockout.enabled" not in page


def test_changed_values_of_every_kind_show_their_defaults(staff_client: Client) -> None:
    resilience_settings_update(
        patch={
            "modelLockout": {"errorCodes": [429, 503]},
            "providerBreaker": {"oauth": {"minimumCalls": 1000}},
            "availability": {"panicEnabled": False},
        }
    )

    page = _page(staff_client)

    assert dict(MARKER.findall(page)) == {
        "providerBreaker.oauth.minimumCalls": "Changed; the default is 10.",
        "modelLockout.errorCodes": "Changed; the default is 408, 429, 500, 502, 503, 504, 529.",
        "availability.panicEnabled": "Changed; the default is Yes.",
    }
    opened = {name for name, shown in _open_sections(page).items() if shown}
    assert opened == {"providerBreaker", "modelLockout", "availability"}


def test_a_field_with_an_error_opens_its_section(staff_client: Client) -> None:
    values = flatten(resilience_settings_document())
    form = {
        field_name(path): ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        for path, value in values.items()
        if not isinstance(value, bool | None)
    }
    form.update({field_name(path): "on" for path, value in values.items() if value is True})
    form[field_name("requestQueue.maxWaitMs")] = "-1"

    response = staff_client.post(PAGE, {**form, "_save": "Save"})

    assert response.status_code == 200  # the form again, with its error
    opened = {name for name, shown in _open_sections(response.content.decode()).items() if shown}
    assert opened == {"requestQueue"}
