"""The chaos run behind ``make chaos``: faults on a seeded schedule, a Redis kill, a bounded
load through combos and single models, then a recovery phase.

One fake upstream, one ``redis-server`` of the run's own and one daphne gateway on it (REDIS_URL,
SQLite in a temporary directory), all on 127.0.0.1, configured through the management API.
Every upstream call takes the next entry of the seeded fault schedule (:mod:`.faults`, pushed
to the fake's ``/_fake/script`` queue). From 15 % of the load until 45 % (and at least 10 s),
the first target of the priority combo is down (every call stalls: its breaker must open); at
50 % the Redis server is killed (SIGKILL) and at 65 % started again. After the load the faults
stop and healthy requests run until every breaker is CLOSED, no lockout is left and the store
is back on Redis (bounded). Then every connection's state is read: none may be terminal.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from omniroute.core.listing import MAX_PAGE_SIZE
from omniroute.tools.availability.run import Operator, prepare_operator
from omniroute.tools.chaos import faults
from omniroute.tools.chaos.check import WaitCaps
from omniroute.tools.chaos.client import Verdict, send
from omniroute.tools.loadgen import free_port, gateway_env, manage, spawned, tool_env
from omniroute.tools.redis_server import RedisServer, running_redis

TERMINAL: Final = frozenset({"banned", "expired", "credits_exhausted"})
OUTAGE: Final = (0.15, 0.45)  # share of the load issued when the outage starts and ends
OUTAGE_MIN_SECONDS: Final = 10.0  # ... but lasts long enough for the breaker to open
# Every call of the model stalls until the gateway times out, on both connections: a stall
# before the answer comes first whatever a scheduled fault says (a scheduled 429 would
# otherwise answer, and a 429 is no breaker failure).
OUTAGE_KNOBS: Final = {"stall": "before"}
REDIS_KILL, REDIS_BACK = 0.50, 0.65
POLL_SECONDS: Final = 0.3
SECRET: Final = "sk-chaos-upstream"
# (provider suffix, model, category, connections): a, b, c serve the combos; s only the
# single model. A timeout counts for a breaker once a second (connection, model) pair of the
# provider failed too, so ``a`` has two connections; its profile is ``local`` (opens at two
# counted failures), so its outage opens its breaker within seconds. (Resets would not do in a
# short run: network failures count once per provider in 10 s.)
PROVIDERS: Final = (
    ("a", "alpha", "local", 2),
    ("b", "beta", "api_key", 1),
    ("c", "gamma", "api_key", 1),
    ("s", "solo", "api_key", 1),
)
DOWN: Final = "alpha"  # the model whose every call fails during the outage
# Shorter than the defaults so that a bounded run sees breakers open and recover; timeouts
# of one to two seconds so that a stalled call costs little.
SETTINGS: Final = {
    "attempts": {"timeToFirstTokenMs": 1000, "streamIdleMs": 1000},
    "providerBreaker": {"apikey": {"resetTimeoutMs": 5000}, "local": {"resetTimeoutMs": 5000}},
    "availability": {"transientCooldownCapMs": 5000},
}
READ_TIMEOUT_SECONDS: Final = "1.5"


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    requests: int = 2000
    concurrency: int = 16
    duration: float = 300.0  # seconds cap on the load
    deadline_ms: int = 15_000  # per request, told to the gateway (X-OmniRoute-Deadline-Ms)
    seed: int = 1
    recovery_seconds: float = 60.0
    stream_share: float = 0.5


@dataclass(frozen=True, slots=True)
class Route:
    """What a client asks for, and the upstream model of each target that can answer it."""

    name: str
    model: str
    models: tuple[str, ...]

    @property
    def targets(self) -> int:
        return len(self.models)


@dataclass(slots=True)
class Observations:
    """What the run saw besides the answers: breaker states over time, the store's state."""

    breakers: dict[str, list[str]] = field(default_factory=dict)  # distinct states in order
    # why each breaker opened, from its transition history: "<reason> at <failureCount>"
    openings: dict[str, dict[int, str]] = field(default_factory=dict)
    store_degraded_seen: bool = False
    events: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def note(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.started:6.1f} s  {what}")

    def see(self, health: dict[str, Any]) -> None:
        for breaker in health.get("providerBreakers", []):
            states = self.breakers.setdefault(breaker["name"], [])
            if not states or states[-1] != breaker["state"]:
                states.append(breaker["state"])
            seen = self.openings.setdefault(breaker["name"], {})
            for step in breaker.get("transitionHistory", []):
                if step.get("to") == "open":
                    seen[step.get("timestamp") or 0] = (
                        f"{step.get('reason')} at {step.get('failureCount')} failures"
                    )
        self.store_degraded_seen |= bool(health.get("store", {}).get("degraded"))


@dataclass(slots=True)
class LoadOutcome:
    """What the clients got: verdicts by (route name, stream), each with the monotonic time
    its request was issued, the violations, one detail of each kind of verdict, and how long
    the load took."""

    outcomes: dict[tuple[str, bool], Counter[str]] = field(default_factory=dict)
    issued: dict[tuple[str, bool], list[tuple[str, float]]] = field(default_factory=dict)
    violations: list[tuple[str, Verdict]] = field(default_factory=list)
    examples: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, route: Route, stream: bool, verdict: Verdict, issued_at: float) -> None:
        self.outcomes.setdefault((route.name, stream), Counter())[verdict.outcome] += 1
        self.issued.setdefault((route.name, stream), []).append((verdict.outcome, issued_at))
        self.examples.setdefault(verdict.outcome, verdict.detail)
        if verdict.violation:
            self.violations.append((f"{route.name}, {'stream' if stream else 'json'}", verdict))


@dataclass(slots=True)
class ChaosResult:
    plan: ChaosPlan
    routes: list[Route]
    load: LoadOutcome
    upstream: dict[str, int]
    injected: Counter[str]  # the schedule's entries the upstream calls took, by fault
    digest: str
    seen: Observations
    recovered_after: float | None  # seconds of the recovery phase until all CLOSED
    recovery: Counter[str]
    final_breakers: dict[str, str]
    final_store: dict[str, Any]
    lockouts_left: int
    connections: list[dict[str, Any]]
    caps: WaitCaps  # how long a request may wait for a target, as the gateway was set
    outage: tuple[float, float] | None  # monotonic start and end of the outage, when it ran
    gateway_alive: bool = True

    @property
    def outcomes(self) -> dict[tuple[str, bool], Counter[str]]:
        return self.load.outcomes

    @property
    def violations(self) -> list[tuple[str, Verdict]]:
        return self.load.violations


class ChaosOperator(Operator):
    """The availability run's operator, with reads and settings."""

    async def get(self, path: str) -> Any:
        async with self.session.get(f"{self.gateway}{path}", headers=self.headers) as response:
            response.raise_for_status()
            return await response.json()

    async def patch(self, path: str, payload: dict[str, Any]) -> None:
        url = f"{self.gateway}{path}"
        async with self.session.patch(url, json=payload, headers=self.headers) as response:
            if response.status != 200:
                raise RuntimeError(f"PATCH {url}: {response.status} {await response.text()}")

    async def fake_post(self, path: str, payload: Any) -> None:
        async with self.session.post(f"{self.fake}{path}", json=payload) as response:
            response.raise_for_status()

    async def topology(self) -> tuple[list[Route], str]:
        """Four providers of one connection each, two combos of three targets, a client key."""
        tag = secrets.token_hex(2)
        slugs = {suffix: f"chaos-{suffix}-{tag}" for suffix, *_ in PROVIDERS}
        for suffix, _, category, connections in PROVIDERS:
            slug = slugs[suffix]
            await self.create(
                "providers",
                {"slug": slug, "name": slug, "category": category, "base_url": f"{self.fake}/v1"},
            )
            for n in range(1, connections + 1):
                url = f"{self.fake}/r/{slug}/{n}/v1"
                await self.create(
                    "connections",
                    {
                        "provider": slug,
                        "name": f"{slug}-{n}",
                        "priority": n,
                        "secret": SECRET,
                        "base_url": url,
                    },
                )
        model = {suffix: m for suffix, m, *_ in PROVIDERS}
        combos = {
            f"chaos-priority-{tag}": ("priority", "abc"),
            f"chaos-rr-{tag}": ("round-robin", "cba"),
        }
        for name, (strategy, order) in combos.items():
            targets = [{"provider": slugs[s], "model": model[s]} for s in order]
            await self.create("combos", {"name": name, "strategy": strategy, "targets": targets})
        routes = [
            Route(f"combo {strategy}", name, tuple(model[s] for s in order))
            for name, (strategy, order) in combos.items()
        ]
        routes += [
            Route("single solo", f"{slugs['s']}/solo", (model["s"],)),
            Route("single gamma (a combo member)", f"{slugs['c']}/gamma", (model["c"],)),
        ]
        key = await self.create("keys", {"name": f"chaos-{tag}", "allowed_models": []})
        return routes, str(key["key"])


async def _poll(operator: ChaosOperator, seen: Observations, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            seen.see(await operator.get("/api/monitoring/health"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            seen.note(f"health unreadable: {type(exc).__name__}")
        await asyncio.sleep(POLL_SECONDS)


Milestone = tuple[float, str, Callable[[], Awaitable[None]]]


async def _load(
    session: aiohttp.ClientSession,
    url: str,
    key: str,
    routes: list[Route],
    plan: ChaosPlan,
    milestones: list[Milestone],
    seen: Observations,
) -> LoadOutcome:
    """``plan.requests`` requests (fewer if the duration runs out) on a seeded mix of routes
    and modes; each milestone runs once when its share of the load has been issued."""
    rng = random.Random(plan.seed)
    mix = [(rng.choice(routes), rng.random() < plan.stream_share) for _ in range(plan.requests)]
    load = LoadOutcome()
    pending = sorted(milestones, key=lambda m: m[0])
    issued = 0
    deadline = time.perf_counter() + plan.duration

    async def milestone() -> None:
        while pending and issued >= pending[0][0] * plan.requests:
            _, what, action = pending.pop(0)
            seen.note(what)
            await action()

    async def worker() -> None:
        nonlocal issued
        while issued < plan.requests and time.perf_counter() < deadline:
            route, stream = mix[issued]
            issued += 1
            await milestone()
            issued_at = time.monotonic()
            verdict = await send(
                session, url, key, route.model, stream=stream, deadline_ms=plan.deadline_ms
            )
            load.add(route, stream, verdict, issued_at)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(plan.concurrency)))
    while pending:  # a duration cap can leave milestones (the Redis restart) unrun
        _, what, action = pending.pop(0)
        seen.note(what + " (after the load)")
        await action()
    load.seconds = time.perf_counter() - started
    return load


async def _recover(
    session: aiohttp.ClientSession,
    operator: ChaosOperator,
    url: str,
    key: str,
    routes: list[Route],
    plan: ChaosPlan,
    seen: Observations,
) -> tuple[float | None, Counter[str], dict[str, Any]]:
    """Healthy requests until every breaker is CLOSED, no model lockout is left and the store
    serves from Redis again (bounded by ``plan.recovery_seconds``)."""
    started = time.monotonic()
    outcomes: Counter[str] = Counter()
    health: dict[str, Any] = {}
    while time.monotonic() - started < plan.recovery_seconds:
        for route in routes:
            verdict = await send(
                session, url, key, route.model, stream=False, deadline_ms=plan.deadline_ms
            )
            outcomes[verdict.outcome] += 1
        health = await operator.get("/api/monitoring/health")
        seen.see(health)
        closed = all(b["state"] == "closed" for b in health.get("providerBreakers", []))
        settled = not health.get("store", {}).get("degraded") and not health.get("lockouts")
        if closed and settled:
            return time.monotonic() - started, outcomes, health
        await asyncio.sleep(0.25)
    return None, outcomes, health


async def _drive(
    gateway: str, fake: str, manage_key: str, plan: ChaosPlan, redis: RedisServer
) -> ChaosResult:
    timeout = aiohttp.ClientTimeout(total=plan.deadline_ms / 1000 + 30)
    connector = aiohttp.TCPConnector(limit=plan.concurrency + 4)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        operator = ChaosOperator(session, gateway, fake, manage_key)
        await operator.patch("/api/resilience", SETTINGS)
        caps = wait_caps(await operator.get("/api/resilience"), plan.deadline_ms)
        routes, key = await operator.topology()
        entries = faults.schedule(plan.seed, plan.requests * 4)
        await operator.fake_stats(reset=True)
        await operator.fake_post("/_fake/script", [knobs for _, knobs in entries])
        seen = Observations()
        seen.see(await operator.get("/api/monitoring/health"))

        outage_began, outage_ended = [0.0], [0.0]
        lifted: list[asyncio.Task[None]] = []

        async def outage() -> None:
            await operator.fake_post("/_fake/models", {"model": DOWN, "knobs": OUTAGE_KNOBS})
            outage_began[0] = time.monotonic()  # from here on, every call of DOWN stalls

        async def lift() -> None:
            await asyncio.sleep(outage_began[0] + OUTAGE_MIN_SECONDS - time.monotonic())
            outage_ended[0] = time.monotonic()  # a call from here on may be answered
            await operator.fake_post("/_fake/models", {"model": DOWN, "knobs": {}})
            seen.note(f"outage over: {DOWN} answers again")

        async def end_outage() -> None:  # in the background: the worker carries on
            lifted.append(asyncio.create_task(lift()))

        milestones: list[Milestone] = [
            (OUTAGE[0], f"outage: every {DOWN} call stalls", outage),
            (OUTAGE[1], f"outage may end (after {OUTAGE_MIN_SECONDS:.0f} s)", end_outage),
            (REDIS_KILL, "redis-server killed (SIGKILL)", lambda: asyncio.to_thread(redis.kill)),
            (REDIS_BACK, "redis-server started again", lambda: asyncio.to_thread(redis.start)),
        ]
        stop = asyncio.Event()
        poller = asyncio.create_task(_poll(operator, seen, stop))
        url = f"{gateway}/v1/chat/completions"
        try:
            load = await _load(session, url, key, routes, plan, milestones, seen)
            await asyncio.gather(*lifted)
        finally:
            stop.set()
            await poller
        upstream = await operator.fake_stats()
        await operator.fake_stats(reset=True)  # the faults stop: script and outage forgotten
        seen.note("faults stopped; recovery phase")
        recovered, recovery, health = await _recover(
            session, operator, url, key, routes, plan, seen
        )
        seen.note("recovered" if recovered is not None else "not recovered in time")
        connections = (await operator.get(f"/api/connections/?limit={MAX_PAGE_SIZE}"))["results"]
        injected = Counter(name for name, _ in entries[: upstream.get("chat", 0)])
        return ChaosResult(
            plan=plan,
            routes=routes,
            load=load,
            upstream=upstream,
            injected=injected,
            digest=faults.digest(entries),
            seen=seen,
            recovered_after=recovered,
            recovery=recovery,
            final_breakers={b["name"]: b["state"] for b in health.get("providerBreakers", [])},
            final_store=health.get("store", {}),
            lockouts_left=len(health.get("lockouts", [])),
            connections=connections,
            caps=caps,
            outage=(outage_began[0], outage_ended[0]) if outage_ended[0] else None,
        )


def wait_caps(document: dict[str, Any], deadline_ms: int) -> WaitCaps:
    """How long the gateway's settings (the ``/api/resilience`` document) let a request wait
    for a target to come back: a single model, a combo."""
    combo = document["comboCooldownWait"]
    waits = combo["enabled"] and combo["maxAttempts"] > 0
    return WaitCaps(
        single_ms=int(document["attempts"]["maxRetryAfterWaitMs"]),
        combo_ms=int(combo["maxWaitMs"]) if waits else 0,
        deadline_ms=deadline_ms,
    )


def run_chaos(plan: ChaosPlan, redis_binary: str) -> ChaosResult:
    """Start Redis, the fake upstream and a gateway, run the load and the recovery, stop them."""
    with (
        tempfile.TemporaryDirectory(prefix="omniroute-chaos-") as data_dir,
        running_redis(redis_binary) as redis,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        env = gateway_env(data_dir)
        env.update(
            REDIS_URL=redis.url,
            OMNIROUTE_REDIS_PREFIX=f"omniroute-chaos-{secrets.token_hex(4)}:",
            # A loaded 2-core machine can queue a healthy Redis call past the 50 ms default.
            OMNIROUTE_STORE_TIMEOUT_MS="250",
            OMNIROUTE_UPSTREAM_READ_TIMEOUT=READ_TIMEOUT_SECONDS,
        )
        prepared = pool.submit(prepare_operator, env)  # migrates while the fake starts
        fake_port, gw_port = free_port(), free_port()
        fake_argv = manage(
            "fakeupstream", "--port", str(fake_port), "--no-record", "--seed", str(plan.seed)
        )
        log = Path(data_dir) / "processes.log"
        with spawned(fake_argv, tool_env(env), fake_port, log=log):
            manage_key = prepared.result()
            with spawned(manage("serve", "--port", str(gw_port)), env, gw_port, log=log) as gw:
                gateway, fake = f"http://127.0.0.1:{gw_port}", f"http://127.0.0.1:{fake_port}"
                result = asyncio.run(_drive(gateway, fake, manage_key, plan, redis))
                result.gateway_alive = gw.poll() is None
                return result
