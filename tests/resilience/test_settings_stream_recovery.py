"""The ``streamRecovery`` section of the settings document: defaults, environment, bounds, the
API, the admin page and the configuration snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from omniroute.core.settings import SETTINGS, SettingsError, flatten
from resilience.admin.settings import field_name
from resilience.domain.attempts.stream_recovery import StreamRecoverySettings, WatchdogSettings
from resilience.models import ResilienceSettings
from resilience.services import resilience_settings_document, resilience_settings_update
from routing.domain.settings.sections import STREAM_RECOVERY
from routing.selectors import config_snapshot_build

NO_ENV: dict[str, str] = {}
URL = "/api/resilience"
WATCHDOG = "streamRecovery.throughputWatchdog"


def _errors(patch: Any) -> dict[str, str]:
    try:
        SETTINGS.validate_patch(patch, SETTINGS.render(SETTINGS.resolve({}, NO_ENV)))
    except SettingsError as error:
        return error.errors
    return {}


# --- defaults and environment ------------------------------------------------------------------


def test_the_defaults() -> None:
    recovery = SETTINGS.resolve({}, NO_ENV)[STREAM_RECOVERY]

    assert recovery == StreamRecoverySettings(
        enabled=False,
        continue_mid_stream=True,  # on here, off in the reference
        watchdog=WatchdogSettings(
            enabled=False,
            warmup_ms=30_000,
            window_ms=30_000,
            min_useful_bytes_per_second=4,
            min_useful_bytes=1,
        ),
    )
    assert recovery == StreamRecoverySettings()  # the dataclass defaults agree with the schema


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), (" YES ", True), ("1", True), ("on", True), ("", False), ("maybe", False)],
)
def test_switches_off_by_default_are_seeded_by_env(raw: str, expected: bool) -> None:
    env = {"STREAM_RECOVERY_ENABLED": raw, "STREAM_THROUGHPUT_WATCHDOG_ENABLED": raw}
    recovery = SETTINGS.resolve({}, env)[STREAM_RECOVERY]
    assert (recovery.enabled, recovery.watchdog.enabled) == (expected, expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("false", False), ("No", False), ("0", False), ("off", False), ("", True), ("?", True)],
)
def test_continue_mid_stream_is_turned_off_by_env(raw: str, expected: bool) -> None:
    env = {"STREAM_RECOVERY_MIDSTREAM_ENABLED": raw}
    assert SETTINGS.resolve({}, env)[STREAM_RECOVERY].continue_mid_stream is expected


def test_watchdog_numbers_are_seeded_by_env_and_clamped() -> None:
    env = {
        "STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS": "0",
        "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS": "500",  # below 1 000: clamped
        "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND": "64",
        "STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES": "many",  # not a number: the default
    }
    watchdog = SETTINGS.resolve({}, env)[STREAM_RECOVERY].watchdog
    assert watchdog == WatchdogSettings(
        warmup_ms=0, window_ms=1_000, min_useful_bytes_per_second=64, min_useful_bytes=1
    )


def test_a_stored_value_wins_over_env() -> None:
    stored = {"streamRecovery": {"enabled": False, "throughputWatchdog": {"windowMs": 10_000}}}
    env = {"STREAM_RECOVERY_ENABLED": "yes", "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS": "20000"}
    recovery = SETTINGS.resolve(stored, env)[STREAM_RECOVERY]
    assert (recovery.enabled, recovery.watchdog.window_ms) == (False, 10_000)


# --- strict patches and rendering --------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "field", "message"),
    [
        ({"streamRecovery": {"enabled": "yes"}}, "streamRecovery.enabled", "must be a boolean"),
        (
            {"streamRecovery": {"continueMidStream": 1}},
            "streamRecovery.continueMidStream",
            "must be a boolean",
        ),
        (
            {"streamRecovery": {"throughputWatchdog": {"warmupMs": -1}}},
            f"{WATCHDOG}.warmupMs",
            "must be between 0 and 600000",
        ),
        (
            {"streamRecovery": {"throughputWatchdog": {"windowMs": 999}}},
            f"{WATCHDOG}.windowMs",
            "must be between 1000 and 600000",
        ),
        (
            {"streamRecovery": {"throughputWatchdog": {"minUsefulBytesPerSecond": 0}}},
            f"{WATCHDOG}.minUsefulBytesPerSecond",
            "must be between 1 and 1000000",
        ),
        (
            {"streamRecovery": {"throughputWatchdog": {"minUsefulBytes": 1_000_001}}},
            f"{WATCHDOG}.minUsefulBytes",
            "must be between 1 and 1000000",
        ),
        (
            {"streamRecovery": {"throughputWatchdog": {"ratio": 1}}},
            f"{WATCHDOG}.ratio",
            "unknown key",
        ),
        ({"streamRecovery": {"throughputWatchdog": True}}, WATCHDOG, "must be an object"),
    ],
)
def test_out_of_range_patches_name_the_field(patch: Any, field: str, message: str) -> None:
    assert _errors(patch) == {field: message}


def test_the_bounds_themselves_are_accepted() -> None:
    patch = {
        "streamRecovery": {
            "throughputWatchdog": {
                "warmupMs": 0,
                "windowMs": 600_000,
                "minUsefulBytesPerSecond": 1,
                "minUsefulBytes": 1_000_000,
            }
        }
    }
    assert _errors(patch) == {}


def test_the_document_round_trips() -> None:
    stored = {
        "streamRecovery": {
            "enabled": True,
            "continueMidStream": False,
            "throughputWatchdog": {"enabled": True, "warmupMs": 5_000, "minUsefulBytes": 16},
        }
    }
    document = SETTINGS.render(SETTINGS.resolve(stored, NO_ENV))

    assert document["streamRecovery"] == {
        "enabled": True,
        "continueMidStream": False,
        "throughputWatchdog": {
            "enabled": True,
            "warmupMs": 5_000,
            "windowMs": 30_000,
            "minUsefulBytesPerSecond": 4,
            "minUsefulBytes": 16,
        },
    }
    assert SETTINGS.resolve(document, NO_ENV) == SETTINGS.resolve(stored, NO_ENV)


# --- the API, the admin page and the snapshot --------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_patch_through_the_api(manage_client: APIClient) -> None:
    patch = {"streamRecovery": {"throughputWatchdog": {"enabled": True, "windowMs": 10_000}}}

    response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 200, response.content
    watchdog = response.json()["streamRecovery"]["throughputWatchdog"]
    assert (watchdog["enabled"], watchdog["windowMs"], watchdog["warmupMs"]) == (
        True,
        10_000,
        30_000,
    )
    assert ResilienceSettings.objects.get().document == patch
    assert manage_client.get(URL).json()["streamRecovery"]["continueMidStream"] is True


@pytest.mark.django_db
def test_the_api_refuses_an_out_of_range_value(manage_client: APIClient) -> None:
    patch = {"streamRecovery": {"throughputWatchdog": {"windowMs": 0}}}

    response = manage_client.patch(URL, patch, format="json")

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert fields == {f"{WATCHDOG}.windowMs": "must be between 1000 and 600000"}
    assert not ResilienceSettings.objects.exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_the_admin_page_edits_the_section(staff_client: Client) -> None:
    change_url = reverse("admin:resilience_resiliencesettings_change", args=[1])
    values = {**flatten(resilience_settings_document()), f"{WATCHDOG}.minUsefulBytes": 8}
    values["streamRecovery.continueMidStream"] = False  # an unticked box is absent from a POST
    form = {field_name(p): v for p, v in values.items() if not isinstance(v, bool | None)}
    form.update({field_name(p): "on" for p, v in values.items() if v is True})

    page = staff_client.get(change_url).content.decode()
    response = staff_client.post(change_url, {**form, "_save": "Save"})

    assert f"{WATCHDOG}.minUsefulBytesPerSecond" in page
    assert response.status_code == 302, response.content
    assert ResilienceSettings.objects.get().document == {
        "streamRecovery": {"continueMidStream": False, "throughputWatchdog": {"minUsefulBytes": 8}}
    }


@pytest.mark.django_db
@pytest.mark.usefixtures("clean_env")
def test_the_snapshot_carries_the_section() -> None:
    resilience_settings_update(
        patch={"streamRecovery": {"enabled": True, "throughputWatchdog": {"warmupMs": 1_000}}}
    )

    recovery = config_snapshot_build(version=1, remote_version=0).stream_recovery

    assert recovery == StreamRecoverySettings(
        enabled=True, watchdog=WatchdogSettings(warmup_ms=1_000)
    )
