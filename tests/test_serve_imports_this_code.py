"""``manage.py serve`` serves the code it belongs to, whatever directory it is started from.

``python -m omniroute.server`` looked in the working directory first: started from a directory
holding another ``omniroute`` (another checkout: the paired bench ran each side's ``serve``
from its own), the server ran that code instead. The request log's writer process, started the
same way, did too (omniroute/core/codepath.py)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
from cryptography.fernet import Fernet

from omniroute.core.codepath import ROOT, child_environ
from omniroute.tools.loadgen import free_port, wait_for_port

DECOY = 'raise ImportError("the working directory\'s omniroute was imported")\n'


def test_serve_from_a_directory_holding_another_omniroute_serves_its_own(tmp_path: Path) -> None:
    # given: a working directory whose omniroute package cannot be imported
    (tmp_path / "omniroute").mkdir()
    (tmp_path / "omniroute" / "__init__.py").write_text(DECOY)
    port = free_port()
    env = {
        **os.environ,
        "OMNIROUTE_DATA_DIR": str(tmp_path / "data"),
        "OMNIROUTE_DEBUG": "0",
        "OMNIROUTE_SECRET_KEY": "serve-" + secrets.token_hex(16),
        "OMNIROUTE_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "OMNIROUTE_STATIC_ROOT": str(tmp_path / "static"),
    }
    log = (tmp_path / "serve.log").open("wb")
    argv = [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port)]

    # when
    server = subprocess.Popen(
        [*argv, "--no-collectstatic"], cwd=tmp_path, env=env, stdout=log, stderr=log
    )
    try:
        wait_for_port(port, timeout=30)
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()

    # then
    assert answer.status_code == 200, (tmp_path / "serve.log").read_text()


def test_a_child_environment_puts_this_code_first() -> None:
    assert child_environ({})["PYTHONPATH"] == str(ROOT)
    assert child_environ({"PYTHONPATH": "/x"})["PYTHONPATH"] == os.pathsep.join((str(ROOT), "/x"))
