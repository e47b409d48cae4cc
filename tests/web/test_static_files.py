"""Static files are served with debug off, through the gateway's ASGI application (WhiteNoise).

A fresh interpreter, configured as a deployment is (debug off, a real secret key, its own
STATIC_ROOT), collects the static files and asks the ASGI application for the admin's
stylesheet and the API docs' script: the middleware lists STATIC_ROOT when it is made, so it
cannot be re-pointed inside this test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import asyncio, json, django, httpx
django.setup()
from django.core.management import call_command
call_command("collectstatic", interactive=False, verbosity=0)
from omniroute.asgi import application

async def main():
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        out = {}
        for path in ("/static/admin/css/base.css",
                     "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js",
                     "/static/admin/css/no-such-file.css"):
            response = await client.get(path)
            out[path] = [response.status_code, response.headers.get("content-type", ""),
                         len(response.content)]
        print(json.dumps(out))

asyncio.run(main())
"""


def _deployment_env(tmp_path: Path) -> dict[str, str]:
    # Nor the run's databases: serving static files needs none, so nothing can land there.
    kept = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env = {k: v for k, v in kept.items() if not k.startswith("OMNIROUTE_")}
    env.update(
        DJANGO_SETTINGS_MODULE="omniroute.settings",
        OMNIROUTE_DEBUG="0",
        OMNIROUTE_SECRET_KEY="static-test-" + "k" * 40,
        OMNIROUTE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        OMNIROUTE_DATA_DIR=str(tmp_path / "data"),
        OMNIROUTE_STATIC_ROOT=str(tmp_path / "static"),
    )
    return env


def test_admin_and_docs_assets_are_served_with_debug_off(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=_deployment_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    served = json.loads(run.stdout.strip().splitlines()[-1])
    status, content_type, size = served["/static/admin/css/base.css"]
    assert (status, content_type.split(";")[0]) == (200, "text/css")
    assert size == (tmp_path / "static/admin/css/base.css").stat().st_size
    script = served["/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"]
    assert script[0] == 200
    assert "javascript" in script[1]
    missing = served["/static/admin/css/no-such-file.css"]
    assert missing[0] == 404
    assert missing[1] == "application/json"  # the gateway's JSON 404, not a route list
