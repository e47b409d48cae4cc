"""``compose.yaml`` and the ``Dockerfile`` it builds, read as data: the gateway starts with
PostgreSQL and Redis, every secret comes from the environment, and the health checks probe
``/readyz``. No docker here: the files are parsed, not run."""

from __future__ import annotations

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


def test_three_services_and_the_gateway_is_built_here(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"gateway", "postgres", "redis"}
    assert compose["services"]["gateway"]["build"] == "."
    assert compose["services"]["postgres"]["image"].startswith("postgres:")
    assert compose["services"]["redis"]["image"].startswith("redis:")


def test_the_gateway_waits_for_healthy_postgres_and_redis(gateway: dict[str, Any]) -> None:
    assert gateway["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }


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


def test_the_gateway_port_is_published(gateway: dict[str, Any]) -> None:
    assert any(str(port).endswith(":8000") for port in gateway["ports"])


def test_the_database_is_on_a_volume(compose: dict[str, Any]) -> None:
    volumes = compose["services"]["postgres"]["volumes"]
    assert "postgres-data:/var/lib/postgresql/data" in volumes
    assert "postgres-data" in compose["volumes"]


def test_the_image_installs_the_gateway_and_migrates_collects_and_serves() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert "pip install --no-cache-dir ." in dockerfile
    start = next(line for line in dockerfile.splitlines() if line.startswith("CMD"))
    steps = ["manage.py migrate", "manage.py collectstatic", "manage.py serve --host 0.0.0.0"]
    positions = [start.index(step) for step in steps]
    assert positions == sorted(positions)
    assert "EXPOSE 8000" in dockerfile


def test_the_image_leaves_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "data"):
        assert entry in ignored


def test_every_variable_the_settings_read_is_documented() -> None:
    settings = (ROOT / "omniroute" / "settings.py").read_text()
    read = set(re.findall(r'env(?:\.\w+|_int|_float)\(\s*"([A-Z0-9_]+)"', settings))
    assert {"OMNIROUTE_DEBUG", "DATABASE_URL", "OMNIROUTE_MAX_UPSTREAM_BODY_BYTES"} <= read
    readme = (ROOT / "README.md").read_text()
    assert {name for name in read if f"| `{name}`" not in readme} == set()
    for name in ("PROMETHEUS_MULTIPROC_DIR", "REDIS_URL", "OMNIROUTE_REDIS_PREFIX"):
        assert f"`{name}`" in readme.split("## Deployment", 1)[1]
