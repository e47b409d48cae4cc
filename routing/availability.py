"""The availability load test behind ``make availability``: sporadic upstream 5xx, and how
many client requests the gateway still answers.

One fake upstream (``--seed`` for repeatable draws) and one daphne gateway with its own data
directory (SQLite, memory store), all on 127.0.0.1, configured through the management API as an
operator would. Each scenario gets a provider of its own, so no breaker, lock or counter carries
over from one scenario to the next; each of its connections points at the fake with a scenario
path that answers ``status`` to a random ``error_rate`` of the calls. A closed-loop aiohttp load
(``concurrency`` workers, exactly ``requests`` requests unless ``duration`` runs out first) counts
every answer by status and error code; the fake's ``/_fake/stats`` tells how many failures it
actually injected. The pass marks are the availability targets: with two connections at least
99.5 % of requests answered and never ``503 all_targets_cooling_down``; with one, 99 %.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
import orjson

from routing.loadgen import PROMPT, fake_stats, free_port, gateway_env, manage, spawned

OK: Final = "200"
COOLING: Final = "503 all_targets_cooling_down"
SECTION_TITLE: Final = "## Availability"
_TIMEOUT: Final = aiohttp.ClientTimeout(total=60)


@dataclass(frozen=True, slots=True)
class Scenario:
    """How many connections the provider has, and what counts as a pass."""

    name: str
    connections: int
    min_success: float
    cooling_allowed: bool


SCENARIOS: Final = (
    Scenario("two connections", 2, 0.995, cooling_allowed=False),
    Scenario("one connection", 1, 0.99, cooling_allowed=True),
)


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """The load of every scenario and the failures the fake upstream injects."""

    requests: int = 3000
    concurrency: int = 16
    duration: float = 120.0
    error_rate: float = 0.05
    status: int = 503
    seed: int = 1


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """What the clients got in one scenario, and what the upstream did."""

    scenario: Scenario
    outcomes: dict[str, int]
    seconds: float
    upstream: dict[str, int] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values())

    @property
    def success_rate(self) -> float:
        return self.outcomes.get(OK, 0) / self.requests if self.requests else 0.0

    @property
    def cooling(self) -> int:
        return self.outcomes.get(COOLING, 0)

    @property
    def other_errors(self) -> dict[str, int]:
        return {k: n for k, n in self.outcomes.items() if k not in (OK, COOLING)}

    @property
    def injected_rate(self) -> float:
        calls = self.upstream.get("chat", 0)
        return self.upstream.get("failed", 0) / calls if calls else 0.0

    def failures(self) -> list[str]:
        """Why this scenario misses its targets; empty when it passes."""
        target = self.scenario.min_success
        reasons = [] if self.requests else ["no request was made"]
        if self.success_rate < target:
            reasons.append(f"{self.success_rate:.2%} answered, below {target:.1%}")
        if self.cooling and not self.scenario.cooling_allowed:
            reasons.append(f"{self.cooling} × {COOLING}")
        return reasons


def _code(status: int, body: bytes) -> str:
    try:
        error = orjson.loads(body).get("error") or {}
        code = error.get("code") or error.get("type") or "no_code"
    except (orjson.JSONDecodeError, AttributeError):
        code = "non_json"
    return f"{status} {code}"


async def _one(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> str:
    try:
        async with session.post(url, json=body, headers=headers) as response:
            payload = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"transport {type(exc).__name__}"
    if response.status == 200:
        return OK if b'"choices"' in payload else "200 malformed"
    return _code(response.status, payload)


async def _load(
    url: str, body: dict[str, Any], headers: dict[str, str], plan: LoadPlan
) -> tuple[dict[str, int], float]:
    """Exactly ``plan.requests`` requests (fewer if the duration runs out), by outcome."""
    outcomes: Counter[str] = Counter()
    issued = 0
    deadline = time.perf_counter() + plan.duration
    connector = aiohttp.TCPConnector(limit=plan.concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=_TIMEOUT) as session:

        async def worker() -> None:
            nonlocal issued
            while issued < plan.requests and time.perf_counter() < deadline:
                issued += 1
                outcomes[await _one(session, url, body, headers)] += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(plan.concurrency)))
        return dict(outcomes), time.perf_counter() - started


class Operator:
    """The management API of the gateway, and the fake's control endpoints."""

    def __init__(self, session: aiohttp.ClientSession, gateway: str, fake: str, key: str) -> None:
        self.session, self.gateway, self.fake = session, gateway, fake
        self.headers = {"authorization": f"Bearer {key}"}

    async def create(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.gateway}/api/{path}/"
        async with self.session.post(url, json=payload, headers=self.headers) as response:
            if response.status != 201:
                raise RuntimeError(f"POST {url}: {response.status} {await response.text()}")
            return dict(await response.json())

    async def route(self, scenario: Scenario, plan: LoadPlan) -> tuple[str, str]:
        """A fresh provider with the scenario's connections; its model and a client key."""
        slug = f"avail-{scenario.connections}c-{secrets.token_hex(3)}"
        knobs = urlencode({"status": plan.status, "error_rate": plan.error_rate})
        await self.create("providers", {"slug": slug, "name": slug, "category": "api_key",
                                        "base_url": f"{self.fake}/v1"})  # fmt: skip
        for index in range(1, scenario.connections + 1):
            await self.create("connections", {
                "provider": slug, "name": f"c{index}", "priority": index,
                "base_url": f"{self.fake}/s/{knobs}/r/{slug}/c{index}/v1",
                "secret": "sk-availability-upstream",
            })  # fmt: skip
        key = await self.create("keys", {"name": slug, "allowed_models": [f"{slug}/*"]})
        return f"{slug}/avail-model", str(key["key"])

    async def fake_stats(self, *, reset: bool = False) -> dict[str, int]:
        return await fake_stats(self.session, self.fake, reset=reset)


async def _scenarios(
    gateway: str, fake: str, manage_key: str, plan: LoadPlan, scenarios: Sequence[Scenario]
) -> list[ScenarioResult]:
    results = []
    async with aiohttp.ClientSession(timeout=_TIMEOUT) as session:
        operator = Operator(session, gateway, fake, manage_key)
        for scenario in scenarios:
            model, key = await operator.route(scenario, plan)
            await operator.fake_stats(reset=True)
            body = {"model": model, "messages": PROMPT}
            headers = {"authorization": f"Bearer {key}"}
            url = f"{gateway}/v1/chat/completions"
            outcomes, seconds = await _load(url, body, headers, plan)
            upstream = await operator.fake_stats()
            results.append(ScenarioResult(scenario, outcomes, seconds, upstream))
    return results


def prepare_operator(env: dict[str, str]) -> str:
    """Migrate the gateway's database; return a new key with the ``manage`` scope."""
    subprocess.run(manage("migrate", "--noinput", "-v", "0"), env=env, check=True)
    argv = manage("createapikey", "--name", "availability-operator", "--scope", "manage")
    return subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout.strip()


def run_availability(
    plan: LoadPlan, scenarios: Sequence[Scenario] = SCENARIOS
) -> list[ScenarioResult]:
    """Start the fake upstream and a gateway, run every scenario, stop them; bounded."""
    with (
        tempfile.TemporaryDirectory(prefix="omniroute-availability-") as data_dir,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        env = gateway_env(data_dir)
        prepared = pool.submit(prepare_operator, env)  # migrates while the fake starts
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage("fakeupstream", "--port", str(fake_port), "--no-record",
                           "--seed", str(plan.seed))  # fmt: skip
        log = Path(data_dir) / "processes.log"
        with spawned(fake_argv, env, fake_port, log=log):
            manage_key = prepared.result()
            with spawned(manage("serve", "--port", str(gw_port)), env, gw_port, log=log):
                gateway, fake = f"http://127.0.0.1:{gw_port}", f"http://127.0.0.1:{fake_port}"
                return asyncio.run(_scenarios(gateway, fake, manage_key, plan, scenarios))


# --------------------------------------------------------------------------- the report

HEADER: Final = (
    "| scenario | requests | answered | 503 all_targets_cooling_down | other errors "
    "| upstream calls | upstream failures injected | req/s | result |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def _row(r: ScenarioResult) -> str:
    others = sum(r.other_errors.values())
    injected = f"{r.upstream.get('failed', 0)} ({r.injected_rate:.2%})"
    verdict = "pass" if not r.failures() else "FAIL: " + "; ".join(r.failures())
    rps = r.requests / r.seconds if r.seconds else 0.0
    return (
        f"| {r.scenario.name} | {r.requests} | {r.success_rate:.2%} | {r.cooling} | {others} "
        f"| {r.upstream.get('chat', 0)} | {injected} | {rps:.0f} | {verdict} |"
    )


def report(results: Sequence[ScenarioResult]) -> str:
    """The results as a Markdown table, then every error answer that was not a cooldown."""
    lines = [HEADER, *(_row(r) for r in results)]
    for r in results:
        if r.other_errors:
            detail = ", ".join(f"`{k}` × {n}" for k, n in sorted(r.other_errors.items()))
            lines.append(f"\nOther errors, {r.scenario.name}: {detail}.")
    return "\n".join(lines)


def section(results: Sequence[ScenarioResult], plan: LoadPlan, stamp: str) -> str:
    """The ``## Availability`` section of BENCHMARKS.md."""
    intro = (
        f"`make availability` (`manage.py availability`), {stamp}: {plan.requests} "
        f"non-streaming requests per scenario at concurrency {plan.concurrency}; every "
        f"connection's upstream answers {plan.status} to a random {plan.error_rate:.0%} of "
        f"calls (fake upstream seed {plan.seed}). One daphne gateway, embedded default (SQLite, "
        "memory store), default resilience settings. Targets: with two connections at least "
        f"99.5 % answered and no `{COOLING}`; with one connection at least 99 %."
    )
    return f"{SECTION_TITLE}\n\n{textwrap.fill(intro, 95)}\n\n{report(results)}\n"


def replace_section(document: str, new_section: str, title: str = SECTION_TITLE) -> str:
    """``document`` with its section ``title`` replaced, or the section appended."""
    lines = document.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == title), None)
    if start is None:
        return document.rstrip("\n") + "\n\n" + new_section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + new_section + ("\n" + tail if tail else "")
