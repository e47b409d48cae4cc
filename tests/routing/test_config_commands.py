"""``manage.py exportconfig`` and ``importconfig`` over a gateway configured through the API:
what an export leaves out, idempotent imports, dry runs, prunes, and errors that name the
file's line and field."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from omniroute.core.store import MemoryStore
from resilience.models.rules import StatusRestatementRule
from routing.domain.config.keys import hash_key
from routing.models import ClientApiKey, Combo, ProviderConnection
from tests.config_support import (
    Api,
    Configured,
    configure,
    secret_of,
    secret_variable,
    secrets_environment,
)

pytestmark = pytest.mark.django_db


def api_of(client: APIClient) -> Api:
    def send(method: str, path: str, payload: dict[str, Any]) -> Any:
        response = getattr(client, method.lower())(path, payload, format="json")
        assert response.status_code in (200, 201), response.content
        return response.json()

    return send


@pytest.fixture
def configured(manage_client: APIClient, fresh_process_store: MemoryStore) -> Configured:
    return configure(api_of(manage_client), lambda slug, i: f"http://{slug}.test/c{i}/v1")


@pytest.fixture
def secrets_in_environment(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    environment = secrets_environment()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return environment


def export() -> str:
    out = StringIO()
    call_command("exportconfig", stdout=out)
    return out.getvalue()


def import_file(path: Path, *flags: str) -> list[str]:
    out = StringIO()
    call_command("importconfig", str(path), *flags, stdout=out)
    return out.getvalue().splitlines()


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, fragment: str) -> int:
    """The 1-based line of the first line containing ``fragment``."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_an_export_has_no_ids_timestamps_or_secrets(configured: Configured) -> None:
    text = export()

    document = yaml.safe_load(text)
    for secret in secrets_environment().values():
        assert secret not in text
    assert configured.client_key not in text
    assert not {"id", "created_at", "updated_at", "revoked_at"} & _all_keys(document)
    alpha_c1 = next(
        c for c in document["connections"] if (c["provider"], c["name"]) == ("alpha", "c1")
    )
    assert alpha_c1["secret"] == "${ENV:" + secret_variable("alpha", 1) + "}"
    team = next(k for k in document["client_keys"] if k["name"] == "team")
    assert team["key_hash"] == hash_key(configured.client_key)
    main = next(c for c in document["combos"] if c["name"] == "main")
    assert main["targets"][0]["connection"] == "c1"  # by name within its provider, not by id
    assert document["builtin_rules"] == [
        {
            "kind": "restatement",
            "provider": "agentrouter",
            "rule_id": "agentrouter-quota-misstatus",
            "is_enabled": False,
        }
    ]
    assert document["settings"]["attempts"] == {"retriesPerTarget": 2}
    assert export() == text  # stable


def _all_keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for value in node.values() for k in _all_keys(value)}
    if isinstance(node, list):
        return {k for item in node for k in _all_keys(item)}
    return set()


def test_importing_an_export_changes_nothing(
    configured: Configured, secrets_in_environment: dict[str, str], tmp_path: Path
) -> None:
    text = export()
    path = written(tmp_path, text)

    assert import_file(path, "--dry-run") == ["no changes"]
    assert import_file(path) == ["no changes"]
    assert export() == text


def test_a_dry_run_reports_a_drift_and_the_import_undoes_it(
    configured: Configured,
    secrets_in_environment: dict[str, str],
    tmp_path: Path,
    manage_client: APIClient,
) -> None:
    path = written(tmp_path, export())
    connection_id = configured.connections[("beta", 2)]
    url = f"/api/connections/{connection_id}/"
    assert manage_client.patch(url, {"priority": 5}, format="json").status_code == 200

    assert import_file(path, "--dry-run") == [
        "~ connections beta/c2: priority",
        "(dry run: nothing was changed)",
    ]
    assert ProviderConnection.objects.get(pk=connection_id).priority == 5
    assert import_file(path) == ["~ connections beta/c2: priority"]
    assert ProviderConnection.objects.get(pk=connection_id).priority == 20
    assert import_file(path) == ["no changes"]


def test_a_secret_comes_from_its_environment_variable(
    configured: Configured,
    secrets_in_environment: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = written(tmp_path, export())
    monkeypatch.setenv(secret_variable("gamma", 1), "sk-rotated-0001")

    assert import_file(path) == ["~ connections gamma/c1: secret"]
    connection = ProviderConnection.objects.get(provider_id="gamma", name="c1")
    assert connection.get_secret() == "sk-rotated-0001"
    assert ProviderConnection.objects.get(provider_id="gamma", name="c2").get_secret() == (
        secret_of("gamma", 2)
    )


def test_a_removed_key_comes_back_with_its_hash(
    configured: Configured, secrets_in_environment: dict[str, str], tmp_path: Path
) -> None:
    path = written(tmp_path, export())
    key_hash = hash_key(configured.client_key)
    ClientApiKey.objects.filter(key_hash=key_hash).delete()

    assert import_file(path) == [f"+ client_keys {key_hash}"]
    restored = ClientApiKey.objects.get(key_hash=key_hash)
    assert restored.name == "team"
    assert restored.prefix == configured.client_key[:12]


def test_prune_removes_what_the_file_no_longer_has(
    configured: Configured, secrets_in_environment: dict[str, str], tmp_path: Path
) -> None:
    document = yaml.safe_load(export())
    document["combos"] = [c for c in document["combos"] if c["name"] != "rotate"]
    document["error_rules"] = []
    path = written(tmp_path, yaml.safe_dump(document, allow_unicode=True))

    assert import_file(path) == ["no changes"]  # without --prune nothing goes
    assert import_file(path, "--prune") == [
        "- combos rotate",
        "- error_rules alpha/credit-balance",
    ]
    assert not Combo.objects.filter(name="rotate").exists()
    assert Combo.objects.filter(name="main").exists()


def test_prune_switches_a_builtin_rule_back_on(
    configured: Configured, secrets_in_environment: dict[str, str], tmp_path: Path
) -> None:
    document = yaml.safe_load(export())
    document["builtin_rules"] = []
    path = written(tmp_path, yaml.safe_dump(document, allow_unicode=True))

    assert import_file(path, "--prune") == [
        "~ builtin_rules restatement/agentrouter/agentrouter-quota-misstatus: is_enabled"
    ]
    assert StatusRestatementRule.objects.get(rule_id="agentrouter-quota-misstatus").is_enabled


def test_a_wrong_kind_of_value_names_its_line_and_field(
    configured: Configured, secrets_in_environment: dict[str, str], tmp_path: Path
) -> None:
    text = export().replace("priority: 20", "priority: high", 1)
    path = written(tmp_path, text)

    with pytest.raises(CommandError) as raised:
        import_file(path)

    index = _index_of(yaml.safe_load(text)["connections"], priority="high")
    line = line_of(text, "priority: high")
    assert str(raised.value) == (
        f"{path}:{line}: connections[{index}].priority: must be a whole number"
    )


def test_a_value_the_services_refuse_names_its_line_and_field(
    configured: Configured, secrets_in_environment: dict[str, str], tmp_path: Path
) -> None:
    text = export().replace("strategy: round-robin", "strategy: sideways", 1)
    path = written(tmp_path, text)

    with pytest.raises(CommandError) as raised:
        import_file(path)

    index = _index_of(yaml.safe_load(text)["combos"], strategy="sideways")
    line = line_of(text, "strategy: sideways")
    assert str(raised.value).startswith(f"{path}:{line}: combos[{index}].strategy: ")
    assert "sideways" in str(raised.value)
    assert Combo.objects.get(name="rotate").strategy == "round-robin"


def _index_of(items: list[dict[str, Any]], **match: Any) -> int:
    return next(i for i, item in enumerate(items) if match.items() <= item.items())


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("${ENV:HOME}", "may only name OMNIROUTE_PROVIDER_SECRET_* variables"),
        ("${ENV:OMNIROUTE_PROVIDER_SECRET_UNSET}", "OMNIROUTE_PROVIDER_SECRET_UNSET is not set"),
    ],
)
def test_a_reference_resolves_only_a_provider_secret_variable_that_is_set(
    configured: Configured,
    secrets_in_environment: dict[str, str],
    tmp_path: Path,
    reference: str,
    message: str,
) -> None:
    variable = "${ENV:" + secret_variable("alpha", 2) + "}"
    text = export().replace(variable, reference)
    path = written(tmp_path, text)

    with pytest.raises(CommandError) as raised:
        import_file(path)

    assert f"{path}:{line_of(text, reference)}: connections[1].secret: " in str(raised.value)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    "text",
    ["version: 1\nwhen: 2024-02-30\n", "version: 1\nbig: " + "9" * 5_000 + "\n"],
    ids=["no such day", "an integer of 5 000 digits"],
)
def test_a_scalar_yaml_cannot_build_is_a_command_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(CommandError, match="not valid YAML"):
        import_file(written(tmp_path, text))


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\xff\xfe version: 1", "not UTF-8 text"), (None, "Is a directory")],
)
def test_an_unreadable_file_is_a_command_error(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "gateway.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)

    with pytest.raises(CommandError) as raised:
        import_file(path)

    assert str(raised.value) == f"{path}: {message}"


def test_a_path_with_a_nul_is_a_command_error() -> None:
    with pytest.raises(CommandError):
        call_command("importconfig", "gate\x00way.yaml")
    with pytest.raises(CommandError):
        call_command("exportconfig", "--output", "gate\x00way.yaml", stdout=StringIO())


@pytest.mark.parametrize("where", ["is a directory", "no/such/directory/gateway.yaml"])
def test_an_export_to_where_it_cannot_be_written_is_a_command_error(
    tmp_path: Path, where: str
) -> None:
    target = tmp_path if where == "is a directory" else tmp_path / where

    with pytest.raises(CommandError, match=str(target)):
        call_command("exportconfig", "--output", str(target), stdout=StringIO())
