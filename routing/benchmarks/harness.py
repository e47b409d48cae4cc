"""The processes under test and one measured run: a warm-up, then a bounded load with the
gateway's CPU time and the fake upstream's counters read around it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import aiohttp
import httpx

from routing.benchmarks.report import row
from routing.loadgen import (
    RunResult,
    fake_stats,
    free_port,
    gateway_env,
    manage,
    operator_key,
    process_cpu_seconds,
    run_load,
    seed_gateway,
    spawned,
    summarise,
    temporary_data_dir,
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
    """One fake upstream and one gateway, seeded with the demo; ``operator`` is a key with the
    ``manage`` scope for the management API, ``client`` the demo key for ``/v1``."""

    gw_pid: int
    fake: str
    gateway: str
    client: str
    operator: str
    bounds: Bounds
    progress: Callable[[str], None] = print
    control: aiohttp.ClientSession | None = field(default=None)

    def direct(self, model: str = "demo-model") -> Target:
        return (f"{self.fake}/v1/chat/completions", model, {})

    def through(self, model: str) -> Target:
        headers = {"authorization": f"Bearer {self.client}"}
        return (f"{self.gateway}/v1/chat/completions", model, headers)

    def management(self) -> httpx.Client:
        auth = {"authorization": f"Bearer {self.operator}"}
        return httpx.Client(base_url=self.gateway, headers=auth, timeout=30)

    async def measure(
        self, label: str, target: Target, *, stream: bool, concurrency: int,
        content: str = SHORT_PROMPT,
    ) -> RunResult:  # fmt: skip
        """A warm-up, then the measured run; the gateway's CPU is read for gateway targets."""
        url, model, headers = target
        body = {"model": model, "messages": [{"role": "user", "content": content}],
                "stream": stream}  # fmt: skip
        await run_load(url, body, headers, concurrency=concurrency,
                       duration=WARM_UP_SECONDS, max_requests=WARM_UP_REQUESTS)  # fmt: skip
        if self.control is None:
            self.control = aiohttp.ClientSession()
        await fake_stats(self.control, self.fake, reset=True)
        before = process_cpu_seconds(self.gw_pid)
        measured = await run_load(
            url, body, headers, concurrency=concurrency,
            duration=self.bounds.duration, max_requests=self.bounds.max_requests,
        )  # fmt: skip
        through = url.startswith(self.gateway)
        cpu = process_cpu_seconds(self.gw_pid) - before if through else None
        upstream = await fake_stats(self.control, self.fake)
        result = summarise(label, stream, concurrency, measured, cpu, upstream)
        self.progress(row(result))
        return result

    async def close(self) -> None:
        if self.control is not None:
            await self.control.close()
            self.control = None


@contextmanager
def started(
    bounds: Bounds, chunks: int, chunk_interval_ms: int, progress: Callable[[str], None]
) -> Iterator[Bench]:
    """The fake upstream and one gateway (embedded default, a temporary data dir), migrated and
    seeded with the demo; both stopped and the data dir removed on exit."""
    with temporary_data_dir() as data_dir:
        env = gateway_env(data_dir)
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage(
            "fakeupstream", "--port", str(fake_port), "--no-record", "--chunks", str(chunks),
            "--chunk-interval-ms", str(chunk_interval_ms),
        )  # fmt: skip
        fake = f"http://127.0.0.1:{fake_port}"
        client = seed_gateway(env, f"{fake}/v1")
        operator = operator_key(env)
        with (
            spawned(fake_argv, env, fake_port),
            spawned(manage("serve", "--port", str(gw_port)), env, gw_port) as gateway,
        ):
            gw_url = f"http://127.0.0.1:{gw_port}"
            yield Bench(gateway.pid, fake, gw_url, client, operator, bounds, progress)


def create_provider(api: httpx.Client, slug: str, base_url: str) -> None:
    """An OpenAI-format provider, through the management API."""
    fields = {"slug": slug, "name": slug, "category": "api_key", "base_url": base_url,
              "wire_format": "openai"}  # fmt: skip
    api.post("/api/providers/", json=fields).raise_for_status()


def create_connection(
    api: httpx.Client, provider: str, name: str, url: str, model: str, priority: int
) -> int:
    """A connection serving ``model``, through the management API; returns its id."""
    made = api.post(
        "/api/connections/",
        json={"provider": provider, "name": name, "priority": priority, "base_url": url,
              "secret": f"{name}-upstream-secret", "served_models": [model]},
    )  # fmt: skip
    made.raise_for_status()
    return int(made.json()["id"])
