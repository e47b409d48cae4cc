"""The emergency fallback: once every target of a request has
failed, the fallback model of the request's wire format is asked, and the decision header says
so. ``OMNIROUTE_EMERGENCY_FALLBACK`` names it; the admin's feature flag overrides it at runtime,
without a restart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.test import Client, override_settings
from django.urls import reverse

from routing.domain.plan.fallback import parse_emergency_fallback
from routing.models import FeatureFlag
from routing.services import feature_flag_save
from tests.routing.harness import (
    OK,
    PRIMARY,
    UNAVAILABLE,
    Gateway,
    add_connection,
    add_provider,
    error,
)

pytestmark = pytest.mark.django_db(transaction=True)

SPARE = "sk-spare-SPARE-0003"
OTHER = "sk-other-OTHER-0004"
FLAG = FeatureFlag.Name.EMERGENCY_FALLBACK


@pytest.fixture
def spare(primary: int) -> int:
    """A second provider whose connection serves ``spare/rescue``."""
    return add_connection(add_provider("spare"), "spare", SPARE)


@pytest.fixture
def other(spare: int) -> int:
    """A third provider whose connection serves ``other/m9``."""
    return add_connection(add_provider("other"), "other", OTHER)


def test_parse_emergency_fallback() -> None:
    assert parse_emergency_fallback("") == {}
    assert parse_emergency_fallback(" openai = a/b , anthropic=c/d ") == {
        "openai": "a/b",
        "anthropic": "c/d",
    }
    for bad in ("a/b", "gemini=a/b", "openai=", "openai=a/b,openai=c/d", "openai=a b"):
        with pytest.raises(ValueError):
            parse_emergency_fallback(bad)


def test_a_malformed_environment_value_stops_the_gateway_at_start_up(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OMNIROUTE_EMERGENCY_FALLBACK": "gemini=x/y",
        "OMNIROUTE_DATA_DIR": str(tmp_path),
    }
    manage = Path(__file__).resolve().parents[2] / "manage.py"

    checked = subprocess.run(
        [sys.executable, str(manage), "check"], env=env, capture_output=True, text=True
    )

    assert checked.returncode != 0
    assert "ImproperlyConfigured: OMNIROUTE_EMERGENCY_FALLBACK: 'gemini=x/y'" in checked.stderr


@override_settings(EMERGENCY_FALLBACK="openai=spare/rescue")
async def test_the_fallback_serves_once_every_target_failed(gateway: Gateway, spare: int) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, SPARE: OK})

    reply = await gateway.call("acme/m1")

    assert reply.status == 200
    assert gateway.fake.sent == [(PRIMARY, "m1"), (PRIMARY, "m1"), (SPARE, "rescue")]
    assert reply.decision()["fallback"] == "spare/rescue"
    assert reply.connection == spare


@override_settings(EMERGENCY_FALLBACK="openai=spare/rescue")
async def test_no_fallback_while_a_target_serves(gateway: Gateway, spare: int) -> None:
    gateway.fake.behaviours.update({PRIMARY: OK, SPARE: OK})

    reply = await gateway.call("acme/m1")

    assert gateway.fake.calls == [PRIMARY]
    assert "fallback" not in reply.decision()


@override_settings(EMERGENCY_FALLBACK="openai=spare/rescue")
async def test_a_client_mistake_is_returned_not_sent_to_the_fallback(
    gateway: Gateway, spare: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: error(400, "temperature must be at most 2")})

    reply = await gateway.call("acme/m1")

    assert reply.status == 400
    assert gateway.fake.calls == [PRIMARY]


@override_settings(EMERGENCY_FALLBACK="anthropic=spare/rescue")
async def test_only_the_request_s_wire_format_has_a_fallback(gateway: Gateway, spare: int) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, SPARE: OK})

    reply = await gateway.call("acme/m1")

    assert reply.status == 503
    assert SPARE not in gateway.fake.calls


@override_settings(EMERGENCY_FALLBACK="openai=spare/rescue")
async def test_when_the_fallback_fails_too_the_client_gets_its_error(
    gateway: Gateway, spare: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, SPARE: error(502, "also down")})

    reply = await gateway.call("acme/m1")

    assert reply.status == 502
    assert reply.decision()["fallback"] == "spare/rescue"


@override_settings(EMERGENCY_FALLBACK="openai=spare/rescue")
async def test_the_feature_flag_overrides_the_environment_without_a_restart(
    gateway: Gateway, other: int
) -> None:
    gateway.fake.behaviours.update({PRIMARY: UNAVAILABLE, SPARE: OK, OTHER: OK})
    save = database_sync_to_async(feature_flag_save)

    before = await gateway.call("acme/m1")
    flag = await save(flag=FeatureFlag(), fields={"name": FLAG, "value": "openai=other/m9"})
    during = await gateway.call("acme/m1")
    await save(flag=flag, fields={"value": ""})  # on, and empty: no fallback at all
    off = await gateway.call("acme/m1")
    await save(flag=flag, fields={"enabled": False})  # the environment's again
    after = await gateway.call("acme/m1")

    assert [r.decision().get("fallback") for r in (before, during, off, after)] == [
        "spare/rescue",
        "other/m9",
        None,
        "spare/rescue",
    ]
    assert off.status == 503


def test_the_admin_page_saves_a_valid_flag_and_refuses_a_bad_one(staff_client: Client) -> None:
    url = reverse("admin:routing_featureflag_add")
    assert staff_client.get(url).status_code == 200

    bad = staff_client.post(url, {"name": FLAG, "enabled": "on", "value": "gemini=x/y"})
    good = staff_client.post(url, {"name": FLAG, "enabled": "on", "value": "openai=a/b"})

    assert bad.status_code == 200 and "expected &lt;format&gt;" in bad.content.decode()
    assert good.status_code == 302
    assert FeatureFlag.objects.get(name=FLAG).value == "openai=a/b"
    changelist = staff_client.get(reverse("admin:routing_featureflag_changelist"))
    assert "openai=a/b" in changelist.content.decode()
