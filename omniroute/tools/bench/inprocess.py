"""``manage.py benchinprocess``: the gateway's CPU per request against the bare proxy's, both
driven in one process, without a server.

A paired bench measures a change within a few percent only over many rounds, because the
server, the network and the load generator share the machine with the gateway and cost more
than the gateway's own work. Here a child process imports both ASGI applications, the gateway's
(``omniroute.asgi``) and the bench's bare proxy (``omniroute.tools.bench.bare``), and hands each
the same request directly, ``concurrency`` at a time, against the bench's real fake upstream
over the gateway's upstream transport. Each round runs ``requests`` requests through one
application, then the other, alternating which goes first; the figure is the CPU of the child
and its children (the gateway's request-log writer process) per request, the median of the
rounds. What differs between the two is the gateway's own work: authentication, planning, the
guards, recording, metrics, the request log, the stream relay (docs/architecture.md, checks and
measurements). One request at a time, the rounds also time each request from the application's
call to its answer's last part, which is what a client waits for (the work after it, such as
recording the request, is not counted), and report each side's median and the gateway's
addition. The child is started as ``serve`` starts a server (``python -P``, this checkout
first), with uvloop and the garbage collector tuned as a serving process has them.

On a virtual machine whose clock speed follows its load, CPU time per request can vary by a
quarter from one round to the next. ``--instructions`` counts instead: each application runs in
a child of its own under valgrind's callgrind, counting only while its measured requests run
(``callgrind_control`` switches the count on after the warm-up and off after the last request),
and the figure is the machine instructions per request, the same from run to run within about
1 %. Under valgrind a request takes about fifty times as long, so timers that fire
within a request natively fire more often (the disconnect watcher after 50 ms): run it at one
request at a time, where a plain request ends before that watcher starts. Instructions are not
time (cache misses, allocation): they say where work was added or removed, and the timed rounds
say what it costs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from omniroute.core.codepath import child_environ, python_module
from omniroute.tools.bench.bare_server import UPSTREAM_VARIABLE
from omniroute.tools.bench.report import CEILING_ADDED_P50_MS
from omniroute.tools.loadgen import stop

KEY_VARIABLE = "OMNIROUTE_INPROCESS_KEY"  # the demo client key, for the child
PATH = "/v1/chat/completions"
GATEWAY, BARE = "gateway", "bare proxy"
WARM_UP_REQUESTS = 500

Application = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Options:
    stream: bool
    concurrency: int
    requests: int
    rounds: int
    counted: str = ""  # instructions: the one side this child runs, counted by callgrind


def request_body(model: str, stream: bool) -> bytes:
    messages = [{"role": "user", "content": "hi"}]
    return json.dumps({"model": model, "messages": messages, "stream": stream}).encode()


def http_scope(body: bytes, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The scope daphne hands an application for ``POST /v1/chat/completions``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def one_request(
    app: Application, scope: dict[str, Any], body: bytes, answered_in: list[int] | None = None
) -> int:
    """One request through ``app``: its body in one message, then (once the answer has ended)
    a disconnect; the answer's status. With ``answered_in``, the nanoseconds from the
    application's call to its answer's last part are appended to it: what a client waits for,
    without the work the application does after it."""
    answered = asyncio.Event()
    status = 0
    sent = False
    started = time.perf_counter_ns() if answered_in is not None else 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif not message.get("more_body"):
            answered.set()
            if answered_in is not None:
                answered_in.append(time.perf_counter_ns() - started)

    await app(dict(scope), receive, send)
    return status


async def drive(
    app: Application,
    scope: dict[str, Any],
    body: bytes,
    count: int,
    concurrency: int,
    answered_in: list[int] | None = None,
) -> dict[int, int]:
    """``count`` requests through ``app``, ``concurrency`` at a time; how many got each status
    (and, with ``answered_in``, how long each took to its answer's last part, in ns)."""
    left = count
    statuses: dict[int, int] = {}

    async def client() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            status = await one_request(app, scope, body, answered_in)
            statuses[status] = statuses.get(status, 0) + 1

    await asyncio.gather(*(client() for _ in range(max(1, concurrency))))
    return statuses


def child_main(options: Options) -> dict[str, Any]:
    """In the child: both applications, alternating rounds; each round's CPU per request (µs).
    With ``counted``: that application alone, its measured requests counted by callgrind."""
    import django

    django.setup()
    from omniroute.asgi import application as gateway
    from omniroute.collector import tune_collector
    from omniroute.tools.bench.bare import application as bare
    from omniroute.tools.loadgen import process_tree_cpu_seconds

    key = os.environ[KEY_VARIABLE].encode()
    json_headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    sides = {
        GATEWAY: (
            gateway,
            request_body("mock/demo-model", options.stream),
            [*json_headers, (b"authorization", b"Bearer " + key)],
        ),
        BARE: (bare, request_body("demo-model", options.stream), json_headers),
    }
    if options.counted:
        sides = {options.counted: sides[options.counted]}
    figures: dict[str, list[float]] = {side: [] for side in sides}
    statuses: dict[str, dict[int, int]] = {side: {} for side in sides}
    # One at a time, each round's median time to the answer (µs): the latency a client adds.
    latency: dict[str, list[float]] = {side: [] for side in sides}

    async def measured(side: str) -> None:
        app, body, headers = sides[side]
        timed = options.concurrency == 1 and not options.counted  # callgrind counts: untimed
        times: list[int] | None = [] if timed else None
        got = await drive(
            app, http_scope(body, headers), body, options.requests, options.concurrency, times
        )
        for status, count in got.items():
            statuses[side][status] = statuses[side].get(status, 0) + count
        if times:
            latency[side].append(statistics.median(times) / 1000)

    async def rounds() -> None:
        for app, body, headers in sides.values():
            await drive(app, http_scope(body, headers), body, WARM_UP_REQUESTS, options.concurrency)
        tune_collector(50_000)
        if options.counted:
            callgrind_count(True)
            await measured(options.counted)
            callgrind_count(False)
            return
        for index in range(options.rounds):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            for side in order:
                before = process_tree_cpu_seconds(os.getpid())
                await measured(side)
                spent = process_tree_cpu_seconds(os.getpid()) - before
                figures[side].append(spent * 1e6 / options.requests)

    try:
        import uvloop
    except ImportError:
        asyncio.run(rounds())
    else:
        uvloop.run(rounds())
    return {"figures": figures, "statuses": statuses, "latency": latency}


def callgrind_count(on: bool) -> None:
    """Switch callgrind's count on or off in this process (run under ``valgrind``)."""
    argv = ["callgrind_control", "--instr=on" if on else "--instr=off", str(os.getpid())]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


_TOTALS = re.compile(r"^(?:totals|summary): (\d+)", re.MULTILINE)


def callgrind_total(text: str) -> int:
    """The instructions a callgrind output file counted (its ``totals:`` line)."""
    found = _TOTALS.findall(text)
    if not found:
        raise RuntimeError("callgrind wrote no totals")
    return max(int(value) for value in found)


def run(options: Options, progress: Callable[[str], None]) -> dict[str, Any]:
    """The fake upstream and a seeded database of their own; the child's figures."""
    with _upstream_and_seed() as env:
        progress(f"driving both applications in one process: {options}")
        done = subprocess.run(
            [*python_module(__name__), json.dumps(asdict(options))],
            env=child_environ(env),
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the in-process child failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def count_instructions(options: Options, progress: Callable[[str], None]) -> dict[str, Any]:
    """Each application in a child of its own under callgrind, both at once (their counts do
    not depend on the time they share); the instructions per measured request of each."""
    valgrind = shutil.which("valgrind")
    if valgrind is None or shutil.which("callgrind_control") is None:
        raise RuntimeError("--instructions needs valgrind (apt-get install valgrind)")
    counts: dict[str, float] = {}
    statuses: dict[str, dict[str, int]] = {}
    with _upstream_and_seed() as env, tempfile.TemporaryDirectory() as scratch:
        children = {}
        for side in (GATEWAY, BARE):
            out = os.path.join(scratch, f"{side.replace(' ', '-')}.callgrind")
            given = json.dumps(asdict(Options(**{**asdict(options), "counted": side})))
            argv = [valgrind, "--tool=callgrind", "--instr-atstart=no"]
            argv += [f"--callgrind-out-file={out}", *python_module(__name__), given]
            progress(f"counting {side}'s instructions under callgrind: {options}")
            child = subprocess.Popen(
                argv, env=child_environ(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            children[side] = (child, out)
        try:
            for side, (child, out) in children.items():
                stdout, stderr = child.communicate()
                if child.returncode != 0:
                    raise RuntimeError(f"the counted child failed:\n{stderr.decode()[-4000:]}")
                answered = json.loads(stdout.decode().strip().splitlines()[-1])
                statuses[side] = answered["statuses"][side]
                with open(out, encoding="utf-8") as counted:
                    counts[side] = callgrind_total(counted.read()) / options.requests
        finally:  # one child failed: the other is not left counting
            for child, _ in children.values():
                if child.returncode is None:
                    stop(child)
    return {"instructions": counts, "statuses": statuses}


@contextmanager
def _upstream_and_seed() -> Iterator[dict[str, str]]:
    """The bench's fake upstream and a seeded database, for the children's environment."""
    from omniroute.tools.loadgen import (
        free_port,
        gateway_env,
        manage,
        seed_gateway,
        spawned,
        temporary_data_dir,
        tool_env,
    )

    with temporary_data_dir() as data_dir:
        env = gateway_env(data_dir)
        port = free_port()
        fake = f"http://127.0.0.1:{port}"
        argv = manage("fakeupstream", "--port", str(port), "--no-record", "--chunks", "20")
        with spawned([*argv, "--chunk-interval-ms", "0"], tool_env(env), port):
            key = seed_gateway(env, f"{fake}/v1")
            env.update({KEY_VARIABLE: key, UPSTREAM_VARIABLE: fake})
            yield env


def render(options: Options, result: dict[str, Any]) -> str:
    """The medians, their ratio and every round (pure)."""
    figures, statuses = result["figures"], result["statuses"]
    gateway, bare = statistics.median(figures[GATEWAY]), statistics.median(figures[BARE])
    mode = "streams" if options.stream else "plain requests"
    lines = [
        f"{mode}, {options.concurrency} at a time, {options.requests} requests a round,"
        f" {options.rounds} rounds (CPU µs per request, the process and its children):",
        "",
        "| application | median µs | every round | statuses |",
        "|---|---|---|---|",
    ]
    for side, median in ((GATEWAY, gateway), (BARE, bare)):
        rounds = " · ".join(f"{value:.0f}" for value in figures[side])
        counts = ", ".join(f"{status}: {n}" for status, n in sorted(statuses[side].items()))
        lines.append(f"| {side} | {median:.1f} | {rounds} | {counts} |")
    lines += ["", f"gateway / bare proxy: {gateway / bare:.2f}× ({gateway - bare:+.1f} µs)"]
    latency = result.get("latency", {})
    if latency.get(GATEWAY) and latency.get(BARE):
        lines += ["", *render_latency(latency)]
    return "\n".join(lines)


def render_latency(latency: dict[str, list[float]]) -> list[str]:
    """One at a time: each side's time from the application's call to its answer's last part,
    and the gateway's addition, beside the served bench's bar (pure)."""
    lines = [
        "One at a time, from the application's call to its answer's last part (µs, the median"
        " of each round's median; the work after the answer is not counted):",
        "",
        "| application | median µs | every round |",
        "|---|---|---|",
    ]
    for side in (GATEWAY, BARE):
        rounds = " · ".join(f"{value:.0f}" for value in latency[side])
        lines.append(f"| {side} | {statistics.median(latency[side]):.1f} | {rounds} |")
    added = statistics.median(latency[GATEWAY]) - statistics.median(latency[BARE])
    lines += [
        "",
        f"added by the gateway: {added:+.1f} µs (the served bench's bar at one client:"
        f" {CEILING_ADDED_P50_MS * 1000:+.0f} µs)",
    ]
    return lines


def render_instructions(options: Options, result: dict[str, Any]) -> str:
    """Each side's instructions per request and their ratio (pure)."""
    counts, statuses = result["instructions"], result["statuses"]
    mode = "streams" if options.stream else "plain requests"
    lines = [
        f"{mode}, {options.concurrency} at a time, {options.requests} requests counted"
        " (machine instructions per request, callgrind):",
        "",
        "| application | instructions per request | statuses |",
        "|---|---|---|",
    ]
    for side in (GATEWAY, BARE):
        got = ", ".join(f"{status}: {n}" for status, n in sorted(statuses[side].items()))
        lines.append(f"| {side} | {counts[side] / 1000:,.1f} k | {got} |")
    gateway, bare = counts[GATEWAY], counts[BARE]
    lines += [
        "",
        f"gateway / bare proxy: {gateway / bare:.2f}× ({(gateway - bare) / 1000:+,.1f} k)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    given = json.loads(sys.argv[1])
    print(json.dumps(child_main(Options(**given))))
