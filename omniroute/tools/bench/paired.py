"""The paired bench's processes: per side, a fake upstream and a gateway started from that
side's checkout, then bounded load runs alternating between the sides, round after round.

A side may be an older version of the code whose modules live elsewhere, so it is driven only
through its own ``manage.py`` commands (``fakeupstream``, ``migrate``, ``seeddemo``,
``serve``) run by its own ``.venv``; nothing of it is imported. Everything listens on
127.0.0.1; every run is bounded by a duration and a request cap; the processes stop and the
data directories go when the context exits (Ctrl-C included).

A side may be served with options of its own (``serve --server uvicorn``, ``serve --workers
2``); its CPU is that of every process of its gateway (with several workers, the supervisor and
each worker). With shared servers every gateway side runs on a fresh PostgreSQL database and
Redis key prefix of its own (``omniroute.tools.bench.shared_state``) instead of SQLite and the
memory store.

With a ceiling, one more side runs in the same rounds: this checkout's bare proxy
(``omniroute.tools.bench.bare``) in front of a fake upstream of its own.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from omniroute.tools.bench.bare_server import bare_proxy
from omniroute.tools.bench.harness import SHORT_PROMPT, WARM_UP_REQUESTS, WARM_UP_SECONDS
from omniroute.tools.bench.pairing import Cell, PairedRun, cell_label, round_orders
from omniroute.tools.bench.shared_state import SharedServers, shared_state
from omniroute.tools.loadgen import (
    free_port,
    gateway_env,
    manage,
    percentile,
    process_cpu_seconds,
    process_tree_cpu_seconds,
    run_load,
    seed_gateway,
    spawned,
    temporary_data_dir,
    tool_env,
)

# Variables that would point a side's interpreter or settings at another checkout.
FOREIGN_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")
ROUTE = "mock/demo-model"


@dataclass(frozen=True, slots=True)
class Plan:
    """What each run does: its bounds, the cells and the rounds, the fake's stream shape."""

    duration: float
    max_requests: int
    cells: tuple[Cell, ...]
    rounds: int
    chunks: int
    chunk_interval_ms: int


@dataclass(frozen=True, slots=True)
class Side:
    """One running side: its gateway's chat URL and demo key, both processes' ids (the ceiling
    side: the bare proxy's URL, no key, and its process id as the gateway's)."""

    name: str
    url: str
    key: str
    gateway_pid: int
    upstream_pid: int


def is_checkout(path: Path) -> bool:
    """A checkout this bench can drive: a ``manage.py`` and its own ``.venv`` interpreter."""
    return (path / "manage.py").is_file() and (path / ".venv" / "bin" / "python").is_file()


def commit_of(path: Path) -> str:
    """The checkout's short commit hash, marked when tracked files differ from it."""
    git = ["git", "-C", str(path)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return path.name
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return head.stdout.strip() + (" + changes" if dirty else "")


def side_env(data_dir: str) -> dict[str, str]:
    """The harness's gateway environment, less what would lead to another checkout."""
    env = gateway_env(data_dir)
    for name in FOREIGN_ENV:
        env.pop(name, None)
    return env


def fake_argv(port: int, plan: Plan, checkout: Path | None = None) -> list[str]:
    """The fake upstream of ``checkout`` (this one by default) shaped by the plan."""
    return manage(
        "fakeupstream",
        *("--port", str(port), "--no-record", "--chunks", str(plan.chunks)),
        *("--chunk-interval-ms", str(plan.chunk_interval_ms)),
        checkout=checkout,
    )


@contextmanager
def started_side(
    name: str,
    checkout: Path,
    plan: Plan,
    extra_env: Mapping[str, str] | None = None,
    serve_options: Sequence[str] = (),
    shared: SharedServers | None = None,
) -> Iterator[Side]:
    """A fake upstream and a gateway of ``checkout`` on fresh ports and a temporary data dir,
    seeded with the demo; both stopped on exit. The gateway runs with debug off, the fake
    upstream (a development tool) with it on; ``extra_env`` is added to both (one checkout
    against itself with a setting changed: ``OMNIROUTE_REQUEST_LOG=0``), ``serve_options`` to
    the gateway's ``serve`` (``--server uvicorn``, ``--workers 2``). With ``shared`` servers
    the side runs on a database and Redis key prefix of its own there, removed after it
    stops."""
    state: AbstractContextManager[dict[str, str]] = nullcontext({})
    if shared is not None:
        state = shared_state(shared, name)
    with temporary_data_dir() as data_dir, state as shared_env:
        env = {**side_env(data_dir), **shared_env, **(extra_env or {})}
        fake_port, gw_port = free_port(), free_port()
        fake = fake_argv(fake_port, plan, checkout)
        serve = manage("serve", "--port", str(gw_port), *serve_options, checkout=checkout)
        log = Path(data_dir) / "processes.log"
        key = seed_gateway(env, f"http://127.0.0.1:{fake_port}/v1", checkout)
        with (
            spawned(fake, tool_env(env), fake_port, log=log, cwd=checkout) as upstream,
            spawned(serve, env, gw_port, log=log, cwd=checkout) as gateway,
        ):
            url = f"http://127.0.0.1:{gw_port}/v1/chat/completions"
            yield Side(name, url, key, gateway.pid, upstream.pid)


@contextmanager
def started_bare(name: str, plan: Plan) -> Iterator[Side]:
    """The ceiling side: a fake upstream and this checkout's bare proxy in front of it, on
    fresh ports, with a gateway's environment (debug off); both stopped on exit."""
    with temporary_data_dir() as data_dir:
        env = side_env(data_dir)
        fake_port, bare_port = free_port(), free_port()
        log = Path(data_dir) / "processes.log"
        with (
            spawned(fake_argv(fake_port, plan), tool_env(env), fake_port, log=log) as upstream,
            bare_proxy(env, bare_port, f"http://127.0.0.1:{fake_port}", log=log) as proxy,
        ):
            url = f"http://127.0.0.1:{bare_port}/v1/chat/completions"
            yield Side(name, url, "", proxy.pid, upstream.pid)


@contextmanager
def started_sides(
    checkouts: dict[str, Path],
    plan: Plan,
    envs: Mapping[str, Mapping[str, str]] | None = None,
    *,
    bare: str | None = None,
    serve_options: Mapping[str, Sequence[str]] | None = None,
    shared: SharedServers | None = None,
) -> Iterator[list[Side]]:
    """Every side started one after another (with its ``envs`` entry added to its
    environment and its ``serve_options`` entry to its ``serve``, on ``shared`` servers when
    given), then the ceiling side when ``bare`` names it; all stopped on exit, whatever
    failed."""
    envs, serve_options = envs or {}, serve_options or {}
    with ExitStack() as stack:
        sides = [
            stack.enter_context(
                started_side(n, p, plan, envs.get(n), serve_options.get(n, ()), shared)
            )
            for n, p in checkouts.items()
        ]
        if bare is not None:
            sides.append(stack.enter_context(started_bare(bare, plan)))
        yield sides


async def measure(side: Side, cell: Cell, round_: int, plan: Plan) -> PairedRun:
    """A short warm-up, then one bounded run; CPU read around it for the gateway (all its
    processes), the fake upstream and this process (the load generator)."""
    stream, concurrency = cell
    body: dict[str, object] = {
        "model": ROUTE,
        "messages": [{"role": "user", "content": SHORT_PROMPT}],
        "stream": stream,
    }
    headers = {"authorization": f"Bearer {side.key}"} if side.key else {}
    warm = (WARM_UP_SECONDS, WARM_UP_REQUESTS)
    await run_load(
        side.url, body, headers, concurrency=concurrency, duration=warm[0], max_requests=warm[1]
    )
    gateway, upstream = (
        process_tree_cpu_seconds(side.gateway_pid),
        process_cpu_seconds(side.upstream_pid),
    )
    loadgen = time.process_time()
    latencies, _, errors, seconds = await run_load(
        side.url,
        body,
        headers,
        concurrency=concurrency,
        duration=plan.duration,
        max_requests=plan.max_requests,
    )
    loadgen_spent = time.process_time() - loadgen
    gateway_spent = process_tree_cpu_seconds(side.gateway_pid) - gateway
    upstream_spent = process_cpu_seconds(side.upstream_pid) - upstream
    answered = len(latencies)

    def per_request(spent: float) -> float:
        return spent * 1000 / answered if answered else 0.0

    return PairedRun(
        side.name,
        stream,
        concurrency,
        round_,
        answered,
        errors,
        per_request(gateway_spent),
        per_request(loadgen_spent),
        per_request(upstream_spent),
        percentile(latencies, 0.5),
        seconds,
    )


def progress_line(run: PairedRun) -> str:
    return (
        f"{cell_label(run.cell)} round {run.round + 1} {run.side}: gateway"
        f" {run.gateway_ms:.3f} ms/req, load generator {run.loadgen_ms:.3f}, upstream"
        f" {run.upstream_ms:.3f} ({run.requests} requests, {run.errors} errors)"
    )


async def alternate(
    sides: Sequence[Side], plan: Plan, progress: Callable[[str], None]
) -> list[PairedRun]:
    """Per cell, ``plan.rounds`` rounds; in each, every side runs once while the others idle,
    in an order that changes every round."""
    by_name = {side.name: side for side in sides}
    runs: list[PairedRun] = []
    for cell in plan.cells:
        for round_, order in enumerate(round_orders(list(by_name), plan.rounds)):
            for name in order:
                run = await measure(by_name[name], cell, round_, plan)
                progress(progress_line(run))
                runs.append(run)
    return runs
