"""``compose.yaml`` and the ``Dockerfile`` it builds, read as data: the gateway starts with
PostgreSQL and Redis once the migrations ran, every secret comes from the environment, the
port is published on 127.0.0.1 unless told otherwise, and the health checks probe ``/readyz``.
No docker here: the files are parsed, not run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SECRETS = ("OMNIROUTE_SECRET_KEY", "OMNIROUTE_ENCRYPTION_KEY")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


@pytest.fixture(scope="module")
def gateway(compose: dict[str, Any]) -> dict[str, Any]:
    service: dict[str, Any] = compose["services"]["gateway"]
    return service


def required_variable(value: str, name: str) -> bool:
    """``value`` is ``${name:?message}``: compose refuses to start while ``name`` is unset."""
    return re.search(r"\$\{" + name + r":\?[^}]+\}", value) is not None


def test_four_services_and_the_gateway_is_built_here(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"gateway", "migrate", "postgres", "redis"}
    assert compose["services"]["gateway"]["build"] == "."
    assert compose["services"]["postgres"]["image"].startswith("postgres:")
    assert compose["services"]["redis"]["image"].startswith("redis:")


def test_the_gateway_waits_for_the_migrations_and_healthy_postgres_and_redis(
    gateway: dict[str, Any],
) -> None:
    assert gateway["depends_on"] == {
        "migrate": {"condition": "service_completed_successfully"},
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }


def test_the_migrations_run_once_from_the_same_image_and_settings(
    compose: dict[str, Any], gateway: dict[str, Any]
) -> None:
    migrate = compose["services"]["migrate"]
    assert migrate["build"] == gateway["build"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["environment"] == gateway["environment"]  # the same database and keys
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert migrate["restart"] == "no"  # one shot: never started again once it exited


def test_the_gateway_gets_what_a_production_start_needs(gateway: dict[str, Any]) -> None:
    env = gateway["environment"]
    assert env["DATABASE_URL"].startswith("postgres://omniroute:")
    assert env["DATABASE_URL"].endswith("@postgres:5432/omniroute")
    assert env["REDIS_URL"] == "redis://redis:6379/0"
    assert env["OMNIROUTE_REDIS_PREFIX"]
    assert env["OMNIROUTE_DEBUG"] == "false"
    assert "127.0.0.1" in env["ALLOWED_HOSTS"]  # the health check's host


def test_every_secret_is_a_required_variable_never_a_literal(compose: dict[str, Any]) -> None:
    env = compose["services"]["gateway"]["environment"]
    for name in SECRETS:
        assert required_variable(env[name], name), env[name]
    assert required_variable(env["DATABASE_URL"], "POSTGRES_PASSWORD")
    postgres_env = compose["services"]["postgres"]["environment"]
    assert required_variable(postgres_env["POSTGRES_PASSWORD"], "POSTGRES_PASSWORD")
    text = (ROOT / "compose.yaml").read_text()
    for name in (*SECRETS, "POSTGRES_PASSWORD"):
        assert f"#   {name}" in text  # the comment says how to generate it


def test_every_gateway_variable_is_one_the_settings_read(gateway: dict[str, Any]) -> None:
    settings = (ROOT / "omniroute" / "settings.py").read_text()
    for name in gateway["environment"]:
        assert f'"{name}"' in settings, name


def test_healthchecks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    probe = " ".join(services["gateway"]["healthcheck"]["test"])
    assert "http://127.0.0.1:8000/readyz" in probe
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_the_gateway_port_is_published_on_127_0_0_1_by_default(gateway: dict[str, Any]) -> None:
    assert gateway["ports"] == ["${OMNIROUTE_BIND:-127.0.0.1}:${OMNIROUTE_PORT:-8000}:8000"]
    text = (ROOT / "compose.yaml").read_text()
    assert "OMNIROUTE_BIND=0.0.0.0" in text  # the comment says how to publish it elsewhere


def test_the_database_is_on_a_volume(compose: dict[str, Any]) -> None:
    volumes = compose["services"]["postgres"]["volumes"]
    assert "postgres-data:/var/lib/postgresql/data" in volumes
    assert "postgres-data" in compose["volumes"]


def dockerfile_instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [step.strip() for step in re.split(r"\n(?=[A-Z]+ )", "\n".join(lines)) if step.strip()]


def test_the_dependencies_are_installed_before_the_code_is_copied() -> None:
    steps = dockerfile_instructions()
    assert steps[0] == "FROM python:3.11-slim"
    copy_project, install_deps, copy_code, install_code = (
        steps.index("COPY pyproject.toml ./"),
        next(i for i, s in enumerate(steps) if "pip install --no-cache-dir -r" in s),
        steps.index("COPY . ."),
        next(i for i, s in enumerate(steps) if "pip install --no-cache-dir --no-deps ." in s),
    )
    assert copy_project < install_deps < copy_code < install_code
    assert "['project']['dependencies']" in steps[install_deps]  # read from pyproject.toml
    # Nothing between the two copies depends on the code.
    assert all(not s.startswith(("COPY", "ADD")) for s in steps[copy_project + 1 : copy_code])


def test_the_image_serves_and_leaves_the_migrations_to_compose() -> None:
    steps = dockerfile_instructions()
    assert "EXPOSE 8000" in steps
    start = json.loads(next(s for s in steps if s.startswith("CMD")).removeprefix("CMD"))
    assert start == ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000"]
    assert not any("migrate" in s for s in steps)


def test_the_image_leaves_local_state_and_secrets_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    # compose's .env holds the deployment's secrets; data/ holds make run's dev.env.
    for entry in (".git", ".venv", "data", ".env", "tests", "omniroute/tools"):
        assert entry in ignored
    assert "pyproject.toml" not in ignored  # the dependency layer copies it


def test_every_variable_the_settings_read_is_documented() -> None:
    settings = (ROOT / "omniroute" / "settings.py").read_text()
    read = set(re.findall(r'env(?:\.\w+|_int|_float)\(\s*"([A-Z0-9_]+)"', settings))
    assert {"OMNIROUTE_DEBUG", "DATABASE_URL", "OMNIROUTE_MAX_UPSTREAM_BODY_BYTES"} <= read
    reference = (ROOT / "docs" / "configuration.md").read_text()
    assert {name for name in read if f"| `{name}`" not in reference} == set()
    deploying = (ROOT / "docs" / "deploying.md").read_text()
    for name in (
        "PROMETHEUS_MULTIPROC_DIR",
        "REDIS_URL",
        "OMNIROUTE_REDIS_PREFIX",
        "OMNIROUTE_SECURE_PROXY_SSL_HEADER",
        "OMNIROUTE_CSRF_TRUSTED_ORIGINS",
        "OMNIROUTE_ENCRYPTION_KEY",
    ):
        assert f"`{name}`" in deploying, name


def test_every_variable_compose_reads_is_documented() -> None:
    text = (ROOT / "compose.yaml").read_text()
    reference = (ROOT / "docs" / "configuration.md").read_text()
    for name in ("OMNIROUTE_BIND", "OMNIROUTE_PORT", "OMNIROUTE_ALLOWED_HOSTS"):
        assert "${" + name + ":-" in text
        assert f"`{name}`" in reference, name
