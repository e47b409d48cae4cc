"""The availability load test behind ``make availability``: sporadic upstream failures, and
how many client requests the gateway still answers.

One fake upstream (``--seed`` for repeatable draws) and one daphne gateway with its own data
directory (SQLite, memory store), all on 127.0.0.1, configured through the management API as an
operator would. Each scenario gets a provider of its own, so no breaker, lock or counter carries
over from one scenario to the next; each of its connections points at the fake with a scenario
path that fails a random share of the calls. A closed-loop aiohttp load (``concurrency``
workers, exactly ``requests`` requests unless ``duration`` runs out first) counts every answer
by status and error code; the fake's ``/_fake/stats`` tells how many failures it actually
injected.

Two faults. *Random*: ``status`` (503) on a random ``error_rate`` (5 %) of calls, at
``concurrency``; the bars are at least 99.5 % answered and never ``503
all_targets_cooling_down`` on two connections, 99 % on one. *Hinted*: 429 with ``Retry-After:
1`` on a random ``hinted_rate`` (4 %) of calls, at ``hinted_concurrency`` (8), on one and on two
connections, each with the provider's ``per_model_quota`` on and off (whether a 429 is charged
to the (connection, model) pair or to the whole connection); beside them, in the same run, the
*direct baseline*: the same load straight to the fake upstream with the same faults, as a
client that does not retry gets it. The product rule is never worse than calling the upstream
directly: one connection must answer at least the direct baseline less one point, two
connections at least 99.5 %. The baseline itself must be what the faults imply (``1 −
hinted_rate`` within 4σ), and every scenario's upstream must have failed about the share asked
for (within 4σ of its calls), so a fault that was not injected cannot pass a bar.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
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


SIGMAS: Final = 4.0  # how far a measured fault or baseline rate may stray by chance


@dataclass(frozen=True, slots=True)
class Scenario:
    """How many connections the provider has (0: the direct baseline, no gateway), which
    fault its upstream injects, and what counts as a pass: a fixed share answered
    (``min_success``) or the direct baseline less ``below_direct``."""

    name: str
    connections: int
    min_success: float | None = None
    cooling_allowed: bool = True
    hinted: bool = False  # the 429 with Retry-After, else the random status
    below_direct: float | None = None
    per_model_quota: bool | None = None  # the provider's flag; None leaves the default

    @property
    def direct(self) -> bool:
        return self.connections == 0


SCENARIOS: Final = (
    Scenario("two connections", 2, 0.995, cooling_allowed=False),
    Scenario("one connection", 1, 0.99, cooling_allowed=True),
)
DIRECT: Final = Scenario("direct (no gateway, no retry)", 0, hinted=True)
ONE_HINTED, TWO_HINTED = "hinted, one connection", "hinted, two connections"
HINTED: Final = (
    DIRECT,
    Scenario(
        f"{ONE_HINTED}, per_model_quota=true",
        1,
        hinted=True,
        below_direct=0.01,
        per_model_quota=True,
    ),
    Scenario(
        f"{ONE_HINTED}, per_model_quota=false",
        1,
        hinted=True,
        below_direct=0.01,
        per_model_quota=False,
    ),
    Scenario(f"{TWO_HINTED}, per_model_quota=true", 2, 0.995, hinted=True, per_model_quota=True),
    Scenario(f"{TWO_HINTED}, per_model_quota=false", 2, 0.995, hinted=True, per_model_quota=False),
)
ALL_SCENARIOS: Final = SCENARIOS + HINTED


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """The load of every scenario and the failures the fake upstream injects."""

    requests: int = 3000
    concurrency: int = 16
    duration: float = 40.0  # seconds cap per scenario: seven of them in a full run
    error_rate: float = 0.05
    status: int = 503
    seed: int = 1
    hinted_rate: float = 0.04
    retry_after: int = 1
    hinted_concurrency: int = 8

    def knobs(self, scenario: Scenario) -> dict[str, object]:
        """The fake upstream's knobs for the scenario's fault."""
        if scenario.hinted:
            return {"status": 429, "retry_after": self.retry_after, "error_rate": self.hinted_rate}
        return {"status": self.status, "error_rate": self.error_rate}

    def rate(self, scenario: Scenario) -> float:
        return self.hinted_rate if scenario.hinted else self.error_rate

    def fault(self, scenario: Scenario) -> str:
        if scenario.hinted:
            return f"{self.hinted_rate:.0%} 429 Retry-After: {self.retry_after}"
        return f"{self.error_rate:.0%} {self.status}"

    def load(self, scenario: Scenario) -> LoadPlan:
        """This plan with the scenario's concurrency."""
        if not scenario.hinted:
            return self
        return dataclasses.replace(self, concurrency=self.hinted_concurrency)


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """What the clients got in one scenario, and what the upstream did."""

    scenario: Scenario
    outcomes: dict[str, int]
    seconds: float
    upstream: dict[str, int] = field(default_factory=dict)
    rate: float | None = None  # the share of calls the fake upstream was asked to fail
    planned: int = 0  # the requests the plan asked for (fewer when the duration ran out)
    fault: str = ""  # the fault, in words
    concurrency: int = 0
    per_model_quota: bool | None = None  # the provider's flag as the gateway stored it

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

    def bar(self, direct: float | None) -> float | None:
        """The share this scenario must answer, given the direct baseline's; None when it has
        no bar (the baseline itself, or a bar relative to a baseline that was not measured)."""
        below = self.scenario.below_direct
        if below is None:
            return self.scenario.min_success
        return None if direct is None else direct - below

    def failures(self, direct: float | None = None) -> list[str]:
        """Why this scenario misses its targets (``direct``: the direct baseline's share
        answered, for a bar relative to it); empty when it passes."""
        reasons = [] if self.requests else ["no request was made"]
        bar, below = self.bar(direct), self.scenario.below_direct
        if below is not None and direct is None:
            reasons.append("no direct baseline measured to compare with")
        elif bar is not None and self.success_rate < bar:
            what = f"{bar:.1%}"
            if below is not None:
                what = f"the direct baseline {direct:.2%} − {below * 100:g} point(s) = {bar:.2%}"
            reasons.append(f"{self.success_rate:.2%} answered, below {what}")
        if self.cooling and not self.scenario.cooling_allowed:
            reasons.append(f"{self.cooling} × {COOLING}")
        if self.scenario.direct and self.rate is not None and self.requests:
            expected = 1.0 - self.rate
            if abs(self.success_rate - expected) > _spread(expected, self.requests):
                what = f"not the {expected:.2%} its faults imply"
                reasons.append(f"the baseline answered {self.success_rate:.2%}, {what}")
        if self.rate is not None and self.requests:
            calls = self.upstream.get("chat", 0)
            if not calls:
                reasons.append("the upstream saw no call: no fault was injected")
            elif abs(self.injected_rate - self.rate) > _spread(self.rate, calls):
                what = f"not the {self.rate:.0%} asked for"
                reasons.append(f"the upstream failed {self.injected_rate:.2%} of its calls, {what}")
        return reasons


def _spread(rate: float, n: int) -> float:
    """How far a binomial share over ``n`` draws may stray from ``rate`` by chance."""
    return SIGMAS * math.sqrt(rate * (1.0 - rate) / n)


def direct_baseline(results: Sequence[ScenarioResult]) -> float | None:
    """The share the direct baseline answered, when the run measured one."""
    return next((r.success_rate for r in results if r.scenario.direct and r.requests), None)


def failures(results: Sequence[ScenarioResult]) -> list[str]:
    """Every scenario that misses its bar, with why; empty when all pass."""
    direct = direct_baseline(results)
    return [f"{r.scenario.name}: {'; '.join(why)}" for r in results if (why := r.failures(direct))]


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
            await self.create("connections", {
                "provider": slug, "name": f"c{index}", "priority": index,
                "base_url": f"{self.fake}/s/{knobs}/r/{slug}/c{index}/v1",
                "secret": "sk-availability-upstream",
            })  # fmt: skip
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
    "| scenario | fault | per_model_quota | concurrency | requests | answered "
    "| direct baseline | bar | 503 all_targets_cooling_down | other errors | upstream calls "
    "| upstream failures injected | req/s | result |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _bar(r: ScenarioResult, direct: float | None) -> str:
    if r.scenario.direct:
        return f"≈ {1 - r.rate:.0%} (1 − fault rate)" if r.rate is not None else "—"
    bar = r.bar(direct)
    if r.scenario.below_direct is not None:
        shown = f"{bar:.2%}" if bar is not None else "?"
        return f"≥ {shown} (direct − {r.scenario.below_direct * 100:g} pt)"
    return f"≥ {bar:.1%}" if bar is not None else "—"


def _row(r: ScenarioResult, direct: float | None) -> str:
    others = sum(r.other_errors.values())
    injected = f"{r.upstream.get('failed', 0)} ({r.injected_rate:.2%})"
    reasons = r.failures(direct)
    verdict = "PASS" if not reasons else "FAIL: " + "; ".join(reasons)
    rps = r.requests / r.seconds if r.seconds else 0.0
    quota = "—" if r.per_model_quota is None else str(r.per_model_quota).lower()
    requests = f"{r.requests}" + (f" of {r.planned}" if r.requests < r.planned else "")
    baseline = "—" if direct is None or not r.scenario.hinted else f"{direct:.2%}"
    return (
        f"| {r.scenario.name} | {r.fault or '—'} | {quota} | {r.concurrency or '—'} "
        f"| {requests} | **{r.success_rate:.2%}** | {baseline} | {_bar(r, direct)} "
        f"| {r.cooling} | {others} | {r.upstream.get('chat', 0)} | {injected} | {rps:.0f} "
        f"| {verdict} |"
    )


def report(results: Sequence[ScenarioResult]) -> str:
    """The results as a Markdown table, then every error answer that was not a cooldown."""
    direct = direct_baseline(results)
    lines = [HEADER, *(_row(r, direct) for r in results)]
    for r in results:
        if r.other_errors:
            detail = ", ".join(f"`{k}` × {n}" for k, n in sorted(r.other_errors.items()))
            lines.append(f"\nOther errors, {r.scenario.name}: {detail}.")
    return "\n".join(lines)


def section(results: Sequence[ScenarioResult], plan: LoadPlan, stamp: str) -> str:
    """The ``## Availability`` section of BENCHMARKS.md."""
    intro = (
        f"`make availability` (`manage.py availability`), {stamp}: up to {plan.requests} "
        f"non-streaming requests per scenario (at most {plan.duration:.0f} s each), fake "
        f"upstream seed {plan.seed}. One daphne gateway, embedded default (SQLite, memory "
        "store), default resilience settings. Random faults: every connection's upstream "
        f"answers {plan.status} to a random {plan.error_rate:.0%} of calls, at concurrency "
        f"{plan.concurrency}; bars: with two connections at least 99.5 % answered and no "
        f"`{COOLING}`, with one at least 99 %. Hinted faults: 429 with `Retry-After: "
        f"{plan.retry_after}` on a random {plan.hinted_rate:.0%} of calls, at concurrency "
        f"{plan.hinted_concurrency}, with the provider's `per_model_quota` on and off; the "
        "direct baseline is the same load sent straight to the fake upstream by a client that "
        "does not retry. Bars: never worse than the direct baseline less one point with one "
        "connection, at least 99.5 % with two. A baseline that is not what its faults imply, "
        "or an upstream that did not fail about the share asked for (4σ), fails its row too."
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
