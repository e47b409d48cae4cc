"""``manage.py benchprofile``: where the gateway spends its CPU under load, sampled with py-spy.

The bench's fake upstream and one gateway (``omniroute.tools.bench.harness``: the embedded
default, seeded with the demo), a warm-up, then ``--seconds`` of closed-loop load at
``--concurrency`` clients (plain or ``--stream``) on ``mock/demo-model`` while ``py-spy record``
samples the gateway process (``--nonblocking``: the process is never paused, so the profile
costs it nothing but the reads). The summary (``omniroute.tools.bench.flame``) is printed, with
``--record`` appended to BENCHMARKS.md, and ``--raw`` keeps py-spy's collapsed stacks for a
flame graph (``flamegraph.pl`` or speedscope read them).

py-spy reads another process's memory: as root, or with ``ptrace`` allowed
(``kernel.yama.ptrace_scope = 0``, or ``--cap-add SYS_PTRACE`` in a container).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.bench import flame
from omniroute.tools.bench.harness import Bounds, started
from omniroute.tools.loadgen import process_cpu_seconds, run_load

MODEL = "mock/demo-model"
WARM_UP_SECONDS = 2.0


def py_spy() -> str:
    """The py-spy executable: beside this interpreter (the project's virtualenv), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise CommandError("py-spy is not installed: .venv/bin/pip install -e '.[dev]'")
    return found


class Command(BaseCommand):
    help = "Profile the gateway under a bounded load with py-spy and summarise where CPU goes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--concurrency", type=int, default=16)
        parser.add_argument("--stream", action="store_true", help="Streamed answers.")
        parser.add_argument("--seconds", type=int, default=10, help="Length of the profiled load.")
        parser.add_argument("--rate", type=int, default=200, help="Samples per second.")
        parser.add_argument("--chunks", type=int, default=20)
        parser.add_argument("--raw", type=Path, help="Keep py-spy's collapsed stacks here.")
        parser.add_argument("--record", action="store_true", help="Append to BENCHMARKS.md.")

    def handle(self, *args: Any, **options: Any) -> None:
        spy, seconds = py_spy(), max(1, options["seconds"])
        concurrency, stream = max(1, options["concurrency"]), bool(options["stream"])
        bounds = Bounds(seconds, 10**7, (concurrency,), (concurrency,), 1, 1, 1)
        with tempfile.TemporaryDirectory(prefix="omniroute-profile-") as scratch:
            raw = options["raw"] or Path(scratch) / "stacks.txt"
            with started(bounds, options["chunks"], 0, self.stderr.write) as bench:
                url, model, headers = bench.through(MODEL)
                hi = [{"role": "user", "content": "hi"}]
                body: dict[str, object] = {"model": model, "messages": hi, "stream": stream}
                load = {"concurrency": concurrency, "max_requests": 10**7}
                asyncio.run(run_load(url, body, headers, duration=WARM_UP_SECONDS, **load))
                argv = [spy, "record", "--pid", str(bench.gw_pid), "--rate", str(options["rate"])]
                argv += ["--duration", str(seconds), "--format", "raw", "--output", str(raw)]
                sampler = subprocess.Popen(
                    [*argv, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                cpu_before = process_cpu_seconds(bench.gw_pid)
                latencies, _, errors, took = asyncio.run(
                    run_load(url, body, headers, duration=seconds, **load)
                )
                cpu = process_cpu_seconds(bench.gw_pid) - cpu_before
                _, complaint = sampler.communicate(timeout=seconds + 30)
            if sampler.returncode != 0 or not raw.exists():
                raise CommandError(f"py-spy failed ({sampler.returncode}): {complaint.decode()}")
            profile = flame.parse(raw.read_text().splitlines())
        answered = len(latencies)
        mode = "streams" if stream else "plain requests"
        intro = (
            f"`manage.py benchprofile --concurrency {concurrency}{' --stream' if stream else ''}"
            f" --seconds {seconds}` at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: {mode} on"
            f" `{MODEL}` from {concurrency} clients, one daphne process (embedded default), the"
            f" gateway sampled {options['rate']} times a second. {answered} answered"
            f" ({answered / took:.0f}/s), {errors} failed; gateway CPU"
            f" {cpu * 1000 / max(answered, 1):.3f} ms per request while sampled."
        )
        body_text = f"{intro}\n\n{flame.render(profile)}"
        self.stdout.write(body_text)
        if options["record"]:
            title = f"where the CPU goes, {concurrency} clients, {mode}"
            date = f"{dt.datetime.now(dt.UTC):%Y-%m-%d}"
            path = Path(settings.BASE_DIR) / "BENCHMARKS.md"
            with path.open("a") as handle:
                handle.write(f"\n## {date} — profile: {title}\n\n{body_text}\n")
