"""The admin at a glance, in a real browser (headless Chromium at 1 280 × 900, Selenium).

With 30 rows of a busy gateway's state in every list, each change list of the project's models
(every ModelAdmin that the repository's own apps register, so a new one is covered without
touching this test), the model-cooldowns page and a combo's change page with its inline targets
fit the window: nothing scrolls sideways, neither the results table's container nor the page.
The admin index sums the gateway's health up in one line whose counts link to the lists.

A screenshot of every page is kept in ``test-artifacts/admin-layout/``
(``OMNIROUTE_TEST_ARTIFACTS`` moves the whole directory); the pictures in ``docs/images/`` are
taken from there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.apps import AppConfig, apps
from django.contrib import admin
from django.db.models import Model
from django.urls import reverse
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from omniroute.core.store import MemoryStore
from routing.models import Combo
from tests.e2e.admin_state import Seeded, seed_busy_gateway
from tests.e2e.conftest import ARTIFACTS, ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 1280, 900
USER, PASSWORD = "operator", "admin-layout-e2e-password"
WAIT_SECONDS = 15
# Every element that scrolls sideways (overflow-x auto or scroll, wider content than box), the
# results table's container, and the page itself.
MEASURE = """
const wide = (el) => el.scrollWidth > el.clientWidth;
const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
  + (typeof el.className === 'string' && el.className ? '.' + el.className.trim() : '');
const table = document.getElementById('result_list');
const box = table ? table.parentElement : null;
return {
  results: box ? [box.scrollWidth, box.clientWidth] : null,
  page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  body: [document.body.scrollWidth, document.body.clientWidth],
  scrollers: [...document.querySelectorAll('body *')].filter((el) => scrolls(el) && wide(el))
    .map((el) => `${name(el)} ${el.scrollWidth}>${el.clientWidth}`),
  rows: table ? table.querySelectorAll('tbody tr').length : 0,
};
"""


@dataclass(frozen=True, slots=True)
class Page:
    """One admin page to measure, and its screenshot's file name."""

    path: str
    shot: str


@pytest.fixture
def screenshots() -> Path:
    directory = ARTIFACTS / "admin-layout"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
def busy_gateway(
    fresh_process_store: MemoryStore, django_user_model: Any, live_server: LiveServer
) -> Iterator[Seeded]:
    django_user_model.objects.create_superuser(USER, "op@example.com", password=PASSWORD)
    yield seed_busy_gateway(fresh_process_store, timezone.now())


@pytest.fixture
def operator(browser: webdriver.Chrome, live_server: LiveServer) -> webdriver.Chrome:
    """The browser at 1 280 × 900, logged in as a superuser."""
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    assert browser.execute_script("return [innerWidth, innerHeight]") == [WIDTH, HEIGHT]
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys(USER)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(browser, WAIT_SECONDS).until(lambda c: "/admin/login/" not in c.current_url)
    return browser


def _ours(config: AppConfig) -> bool:
    """An app of this repository (not Django's, not an installed package's)."""
    path = Path(config.path)
    return path.is_relative_to(ROOT) and not path.is_relative_to(ROOT / ".venv")


def project_models() -> list[type[Model]]:
    """Every model the project's own apps register with the admin, in a stable order."""
    ours = {config.label for config in apps.get_app_configs() if _ours(config)}
    registered = [m for m in admin.site._registry if m._meta.app_label in ours]
    return sorted(registered, key=lambda m: (m._meta.app_label, m._meta.model_name or ""))


def _changelist(model: type[Model]) -> Page:
    opts = model._meta
    return Page(
        reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        f"admin-{opts.app_label}-{opts.model_name}.png",
    )


def _visit(chrome: webdriver.Chrome, url: str, page: Page, screenshots: Path) -> dict[str, Any]:
    chrome.get(url + page.path)
    WebDriverWait(chrome, WAIT_SECONDS).until(
        lambda c: c.execute_script("return document.readyState") == "complete"
    )
    assert chrome.find_elements(By.ID, "content"), f"{page.path} is not an admin page"
    if inline := chrome.find_elements(By.CSS_SELECTOR, ".inline-group"):
        chrome.execute_script("arguments[0].scrollIntoView()", inline[0])  # into the screenshot
    assert chrome.save_screenshot(str(screenshots / page.shot))
    measured: dict[str, Any] = chrome.execute_script(MEASURE)
    return measured


def _overflows(measured: dict[str, Any]) -> list[str]:
    found = [f"{what} {w}>{c}" for what in ("page", "body") for w, c in [measured[what]] if w > c]
    if measured["results"] is not None and measured["results"][0] > measured["results"][1]:
        found.append("results {}>{}".format(*measured["results"]))
    return found + list(measured["scrollers"])


def test_every_admin_list_fits_1280_pixels_without_scrolling_sideways(
    busy_gateway: Seeded,
    operator: webdriver.Chrome,
    live_server: LiveServer,
    screenshots: Path,
) -> None:
    combo = Combo.objects.order_by("-pk").first()
    assert combo is not None and combo.targets.count() >= 2
    lists = [_changelist(model) for model in project_models()]
    assert len(lists) >= 13  # the 13 ModelAdmins of routing, resilience and leases today
    pages = [
        *lists,
        Page(reverse("admin:routing_combo_change", args=[combo.pk]), "admin-combo-change.png"),
    ]

    measured = {page.path: _visit(operator, live_server.url, page, screenshots) for page in pages}

    overflowing = {path: found for path, m in measured.items() if (found := _overflows(m))}
    assert not overflowing, f"pages wider than {WIDTH} px: {overflowing}"
    cooldowns = measured[reverse("admin:resilience_modelcooldown_changelist")]
    assert cooldowns["rows"] == busy_gateway.locked
    empty = [
        page.path
        for page in lists
        if measured[page.path]["results"] and not _has_rows(page, measured)
    ]
    assert not empty, f"lists the seed left empty (nothing was measured): {empty}"


def _has_rows(page: Page, measured: dict[str, dict[str, Any]]) -> bool:
    return int(measured[page.path]["rows"]) > 0


def test_the_index_sums_health_up_in_one_line_linking_to_the_lists(
    busy_gateway: Seeded,
    operator: webdriver.Chrome,
    live_server: LiveServer,
    screenshots: Path,
) -> None:
    expected = {
        "open-breakers": busy_gateway.open_breakers,
        "cooling-connections": busy_gateway.cooling,
        "terminal-connections": busy_gateway.terminal,
        "locked-models": busy_gateway.locked,
        "active-leases": busy_gateway.leases,
    }
    page = Page(reverse("admin:index"), "admin-index.png")
    index = _visit(operator, live_server.url, page, screenshots)
    assert not _overflows(index), _overflows(index)
    links = operator.find_elements(By.CSS_SELECTOR, "#health-summary a[data-figure]")
    shown = {link.get_attribute("data-figure"): link for link in links}
    assert {figure: int(link.text.split()[0]) for figure, link in shown.items()} == expected
    targets = {figure: str(link.get_attribute("href")) for figure, link in shown.items()}

    listed = {figure: _rows_at(operator, url) for figure, url in targets.items()}

    assert listed == expected  # each count's link lists exactly those rows


def _rows_at(chrome: webdriver.Chrome, url: str) -> int:
    chrome.get(url)
    return len(chrome.find_elements(By.CSS_SELECTOR, "#result_list tbody tr"))
