"""The processes under test and one measured run: a warm-up, then a bounded load with the CPU
time of the proxy under test (the gateway or the bare proxy: every process of it, and their
children, such as the gateway's request-log writer), of the fake upstream and of the load
generator (this process), and the fake upstream's counters, read around it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace

import aiohttp
import httpx

from omniroute.tools.bench.bare_server import bare_proxy
from omniroute.tools.bench.report import row
from omniroute.tools.loadgen import (
    RunResult,
    fake_stats,
    free_port,
    gateway_env,
    manage,
    operator_key,
    process_cpu_seconds,
    process_tree_cpu_seconds,
    run_load,
    seed_gateway,
    spawned,
    summarise,
    temporary_data_dir,
    tool_env,
)

Target = tuple[str, str, dict[str, str]]  # URL, model, headers
SHORT_PROMPT = "hi"
WARM_UP_SECONDS, WARM_UP_REQUESTS = 0.5, 500


@dataclass(frozen=True, slots=True)
class Bounds:
    """How long and how many requests each measured run may take, and the phases' levels."""

    duration: float
    max_requests: int
    levels: tuple[int, ...]  # the base phase's concurrencies
    sweep: tuple[int, ...]  # the concurrency phase's
    connections: int  # the scale phase's connection count
    prompt_bytes: int  # the prompt phase's message size
    rounds: int  # repeated runs per row in the scale and prompt phases


@dataclass(slots=True)
class Bench:
    """One fake upstream and one gateway, seeded with the demo, and maybe the bare proxy in
    front of the same fake upstream; ``operator`` is a key with the ``manage`` scope for the
    management API, ``client`` the demo key for ``/v1``. ``proxies`` maps the base URL of each
    proxy under test (the gateway's, the bare proxy's) to its processes' ids: the CPU of a run
    is summed over them and their children."""

    gw_pid: int
    fake: str
    gateway: str
    client: str
    operator: str
    bounds: Bounds
    progress: Callable[[str], None] = print
    control: aiohttp.ClientSession | None = field(default=None)
    fake_pid: int | None = None
    bare: str | None = None  # the bare proxy's base URL, when it runs
    proxies: dict[str, tuple[int, ...]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the gateway's environment

    def __post_init__(self) -> None:
        self.proxies.setdefault(self.gateway, (self.gw_pid,))

    def direct(self, model: str = "demo-model") -> Target:
        return (f"{self.fake}/v1/chat/completions", model, {})

    def bare_proxy(self, model: str = "demo-model") -> Target:
        """The fake upstream through the bare proxy (``omniroute.tools.bench.bare``)."""
        if self.bare is None:
            raise RuntimeError("the bench was started without the bare proxy")
        return (f"{self.bare}/v1/chat/completions", model, {})

    def through(self, model: str) -> Target:
        headers = {"authorization": f"Bearer {self.client}"}
        return (f"{self.gateway}/v1/chat/completions", model, headers)

    def management(self) -> httpx.Client:
        auth = {"authorization": f"Bearer {self.operator}"}
        return httpx.Client(base_url=self.gateway, headers=auth, timeout=30)

    async def measure(
        self,
        label: str,
        target: Target,
        *,
        stream: bool,
        concurrency: int,
        content: str = SHORT_PROMPT,
        messages: list[dict[str, object]] | None = None,
    ) -> RunResult:
        """A warm-up, then the measured run; the proxy's CPU is read for a proxied target, the
        fake upstream's and the load generator's for every one. The request asks with one user
        message of ``content``, or with ``messages`` when given."""
        url, model, headers = target
        body = {
            "model": model,
            "messages": messages or [{"role": "user", "content": content}],
            "stream": stream,
        }
        await run_load(
            url,
            body,
            headers,
            concurrency=concurrency,
            duration=WARM_UP_SECONDS,
            max_requests=WARM_UP_REQUESTS,
        )
        if self.control is None:
            self.control = aiohttp.ClientSession()
        await fake_stats(self.control, self.fake, reset=True)
        pids = next((p for base, p in self.proxies.items() if url.startswith(f"{base}/")), ())
        before = proxies_cpu_seconds(pids)
        upstream_before = self._fake_cpu()
        loadgen_before = time.process_time()
        measured = await run_load(
            url,
            body,
            headers,
            concurrency=concurrency,
            duration=self.bounds.duration,
            max_requests=self.bounds.max_requests,
        )
        loadgen = time.process_time() - loadgen_before
        cpu = proxies_cpu_seconds(pids) - before if pids else None
        upstream_cpu = self._fake_cpu() - upstream_before if self.fake_pid is not None else None
        upstream = await fake_stats(self.control, self.fake)
        result = summarise(label, stream, concurrency, measured, cpu, upstream)
        result = replace(
            result,
            loadgen_cpu_ms_per_request=per_request(loadgen, result.requests),
            upstream_cpu_ms_per_request=per_request(upstream_cpu, result.requests),
        )
        self.progress(row(result))
        return result

    def _fake_cpu(self) -> float:
        return process_cpu_seconds(self.fake_pid) if self.fake_pid is not None else 0.0

    async def close(self) -> None:
        if self.control is not None:
            await self.control.close()
            self.control = None


def proxies_cpu_seconds(pids: tuple[int, ...]) -> float:
    """User + system CPU time so far of the processes ``pids`` and their live children."""
    return sum(process_tree_cpu_seconds(pid) for pid in pids)


def per_request(seconds: float | None, requests: int) -> float | None:
    """CPU seconds spent over a run as milliseconds per answered request."""
    return seconds * 1000 / requests if seconds is not None and requests else None


@contextmanager
def started(
    bounds: Bounds,
    chunks: int,
    chunk_interval_ms: int,
    progress: Callable[[str], None],
    *,
    with_bare: bool = False,
) -> Iterator[Bench]:
    """The fake upstream and one gateway (embedded default, a temporary data dir), migrated and
    seeded with the demo, and with ``with_bare`` the bare proxy in front of the same fake
    upstream (the gateway's environment, so its settings); all stopped and the data dir
    removed on exit."""
    with temporary_data_dir() as data_dir:
        env = gateway_env(data_dir)
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage(
            "fakeupstream",
            "--port",
            str(fake_port),
            "--no-record",
            "--chunks",
            str(chunks),
            "--chunk-interval-ms",
            str(chunk_interval_ms),
        )
        fake = f"http://127.0.0.1:{fake_port}"
        client = seed_gateway(env, f"{fake}/v1")
        operator = operator_key(env)
        with ExitStack() as stack:
            upstream = stack.enter_context(spawned(fake_argv, tool_env(env), fake_port))
            serve = manage("serve", "--port", str(gw_port))
            gateway = stack.enter_context(spawned(serve, env, gw_port))
            gw_url = f"http://127.0.0.1:{gw_port}"
            bench = Bench(gateway.pid, fake, gw_url, client, operator, bounds, progress)
            bench.fake_pid, bench.env = upstream.pid, env
            if with_bare:
                bare_port = free_port()
                bare = stack.enter_context(bare_proxy(env, bare_port, fake))
                bench.bare = f"http://127.0.0.1:{bare_port}"
                bench.proxies[bench.bare] = (bare.pid,)
            yield bench


def create_provider(api: httpx.Client, slug: str, base_url: str) -> None:
    """An OpenAI-format provider, through the management API."""
    fields = {
        "slug": slug,
        "name": slug,
        "category": "api_key",
        "base_url": base_url,
        "wire_format": "openai",
    }
    api.post("/api/providers/", json=fields).raise_for_status()


def create_connection(
    api: httpx.Client, provider: str, name: str, url: str, model: str, priority: int
) -> int:
    """A connection serving ``model``, through the management API; returns its id."""
    made = api.post(
        "/api/connections/",
        json={
            "provider": provider,
            "name": name,
            "priority": priority,
            "base_url": url,
            "secret": f"{name}-upstream-secret",
            "served_models": [model],
        },
    )
    made.raise_for_status()
    return int(made.json()["id"])
