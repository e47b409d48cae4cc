"""One availability run: the fake upstream and a gateway, configured as an operator would,
then each scenario's load."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
import orjson

from omniroute.tools.availability.scenarios import (
    ALL_SCENARIOS,
    OK,
    LoadPlan,
    Scenario,
    ScenarioResult,
)
from omniroute.tools.loadgen import (
    PROMPT,
    fake_stats,
    free_port,
    gateway_env,
    manage,
    spawned,
    tool_env,
)

_TIMEOUT: Final = aiohttp.ClientTimeout(total=60)


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

    async def route(self, scenario: Scenario, plan: LoadPlan) -> tuple[str, str, bool]:
        """A fresh provider with the scenario's connections; its model, a client key and the
        provider's ``per_model_quota`` as stored."""
        slug = f"avail-{scenario.connections}c-{secrets.token_hex(3)}"
        knobs = urlencode(plan.knobs(scenario))
        provider: dict[str, Any] = {"slug": slug, "name": slug, "category": "api_key"}
        provider["base_url"] = f"{self.fake}/v1"
        if scenario.per_model_quota is not None:
            provider["per_model_quota"] = scenario.per_model_quota
        created = await self.create("providers", provider)
        for index in range(1, scenario.connections + 1):
            await self.create(
                "connections",
                {
                    "provider": slug,
                    "name": f"c{index}",
                    "priority": index,
                    "base_url": f"{self.fake}/s/{knobs}/r/{slug}/c{index}/v1",
                    "secret": "sk-availability-upstream",
                },
            )
        key = await self.create("keys", {"name": slug, "allowed_models": [f"{slug}/*"]})
        return f"{slug}/avail-model", str(key["key"]), bool(created["per_model_quota"])

    async def fake_stats(self, *, reset: bool = False) -> dict[str, int]:
        return await fake_stats(self.session, self.fake, reset=reset)


async def _scenarios(
    gateway: str, fake: str, manage_key: str, plan: LoadPlan, scenarios: Sequence[Scenario]
) -> list[ScenarioResult]:
    results = []
    async with aiohttp.ClientSession(timeout=_TIMEOUT) as session:
        operator = Operator(session, gateway, fake, manage_key)
        for scenario in scenarios:
            quota: bool | None = None
            if scenario.direct:  # the same faults, straight to the upstream: no gateway
                knobs = urlencode(plan.knobs(scenario))
                url = f"{fake}/s/{knobs}/r/direct/v1/chat/completions"
                body, headers = {"model": "avail-model", "messages": PROMPT}, {}
            else:
                model, key, quota = await operator.route(scenario, plan)
                url = f"{gateway}/v1/chat/completions"
                body = {"model": model, "messages": PROMPT}
                headers = {"authorization": f"Bearer {key}"}
            await operator.fake_stats(reset=True)
            load = plan.load(scenario)
            outcomes, seconds = await _load(url, body, headers, load)
            upstream = await operator.fake_stats()
            result = ScenarioResult(
                scenario,
                outcomes,
                seconds,
                upstream,
                rate=plan.rate(scenario),
                planned=plan.requests,
                fault=plan.fault(scenario),
                concurrency=load.concurrency,
                per_model_quota=quota,
            )
            results.append(result)
    return results


def prepare_operator(env: dict[str, str]) -> str:
    """Migrate the gateway's database; return a new key with the ``manage`` scope."""
    subprocess.run(manage("migrate", "--noinput", "-v", "0"), env=env, check=True)
    argv = manage("createapikey", "--name", "availability-operator", "--scope", "manage")
    return subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout.strip()


def run_availability(
    plan: LoadPlan, scenarios: Sequence[Scenario] = ALL_SCENARIOS
) -> list[ScenarioResult]:
    """Start the fake upstream and a gateway, run every scenario, stop them; bounded."""
    with (
        tempfile.TemporaryDirectory(prefix="omniroute-availability-") as data_dir,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        env = gateway_env(data_dir)
        prepared = pool.submit(prepare_operator, env)  # migrates while the fake starts
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage(
            "fakeupstream", "--port", str(fake_port), "--no-record", "--seed", str(plan.seed)
        )
        log = Path(data_dir) / "processes.log"
        with spawned(fake_argv, tool_env(env), fake_port, log=log):
            manage_key = prepared.result()
            with spawned(manage("serve", "--port", str(gw_port)), env, gw_port, log=log):
                gateway, fake = f"http://127.0.0.1:{gw_port}", f"http://127.0.0.1:{fake_port}"
                return asyncio.run(_scenarios(gateway, fake, manage_key, plan, scenarios))


# --------------------------------------------------------------------------- the report
