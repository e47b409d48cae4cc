"""Configuration as code across two real gateways: one configured through its API, exported,
and imported into an empty database with the secrets in the environment. The second export is
byte-identical, a request is routed the same way on both, a second import (dry run) changes
nothing, ``--prune`` removes what the file dropped, and an error names the line and field."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from omniroute.tools.fakeupstream import FakeUpstream
from tests.config_support import Configured, configure, secret_of, secrets_environment
from tests.databases import gateway_database
from tests.e2e.conftest import Gateway, _gateway_env, manage, prepare_gateway, scenario_url, serving

pytestmark = pytest.mark.e2e


def api_of(gateway: Gateway) -> Any:
    def send(method: str, path: str, payload: dict[str, Any]) -> Any:
        response = gateway.api.request(method, path, json=payload)
        assert response.status_code in (200, 201), response.text
        return response.json()

    return send


def routed(gateway: Gateway, fake: FakeUpstream, key: str, model: str) -> tuple[str, ...]:
    """Where one request for ``model`` went: the decision header's target and provider, the
    fake's path (which names the provider and connection) and the secret it carried."""
    seen = len(fake.requests)
    with gateway.client(key) as client:
        response = client.post(
            "/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        )
    assert response.status_code == 200, response.text
    decision = dict(
        part.split("=", 1) for part in response.headers["x-omniroute-decision"].split("; ")
    )
    (record,) = [r for r in fake.requests[seen:] if r.path.endswith("/chat/completions")]
    headers = {name.lower(): value for name, value in record.headers.items()}
    route = record.path.split("/r/", 1)[1].rsplit("/v1/", 1)[0]
    return decision["target"], decision["provider"], route, headers["authorization"]


def empty_gateway(data_dir: Path) -> dict[str, str]:
    """A migrated gateway database with nothing configured (not even an operator key)."""
    env = gateway_database(_gateway_env(data_dir))
    manage("migrate", "--noinput", "-v", "0", env=env)
    return env


def test_a_configuration_round_trips_into_an_empty_database(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    # given: gateway A configured through its API
    env_a, manage_key = prepare_gateway(tmp_path / "a")
    with serving(env_a, manage_key) as a:
        configured: Configured = configure(
            api_of(a), lambda slug, i: scenario_url(fake, slug, i, {}) if i else fake.base_url()
        )
        exported = manage("exportconfig", env=env_a)
        on_a = [routed(a, fake, configured.client_key, m) for m in ("main", "nested")]
    path = tmp_path / "gateway.yaml"
    path.write_text(exported, encoding="utf-8")

    # when: imported into an empty database, secrets from the environment
    env_b = {**empty_gateway(tmp_path / "b"), **secrets_environment()}
    applied = manage("importconfig", str(path), env=env_b).splitlines()

    # then
    assert "+ connections alpha/c1" in applied and "+ combos nested" in applied
    assert manage("exportconfig", env=env_b) == exported
    assert manage("importconfig", str(path), "--dry-run", env=env_b) == "no changes\n"
    with serving(env_b, manage_key) as b:  # A's operator key, recreated from its hash
        on_b = [routed(b, fake, configured.client_key, m) for m in ("main", "nested")]
        assert on_b == on_a
        assert on_b[0] == ("alpha/m1", "alpha", "alpha/c1", f"Bearer {secret_of('alpha', 1)}")

        document = yaml.safe_load(exported)
        document["combos"] = [c for c in document["combos"] if c["name"] != "rotate"]
        pruned = tmp_path / "pruned.yaml"
        pruned.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
        assert manage("importconfig", str(pruned), "--prune", env=env_b) == "- combos rotate\n"
        combos = b.api.get("/api/config").json()["combos"]
        assert [c["name"] for c in combos] == ["main", "nested", "spread"]


def test_an_import_error_names_the_line_and_the_field(tmp_path: Path) -> None:
    env = empty_gateway(tmp_path / "gateway")
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "version: 1\nproviders:\n  - slug: delta\n    name: Delta\n    category: api_key\n"
        "    base_url: http://delta.test/v1\n    max_concurrent: many\n",
        encoding="utf-8",
    )

    with pytest.raises(subprocess.CalledProcessError) as failed:
        manage("importconfig", str(path), env=env)

    assert f"{path}:7: providers[0].max_concurrent: must be a whole number" in failed.value.stderr
    assert "delta" not in manage("exportconfig", env=env)
