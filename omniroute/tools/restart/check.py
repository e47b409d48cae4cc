"""``manage.py restarttest``: kill -9 the gateway under load, start it again on the same data,
and check that its durable state is as it was.

One run, in one mode (the embedded default: SQLite and the memory store; or PostgreSQL and
Redis): a fake upstream and a gateway on 127.0.0.1, configured through the management API; a
bounded background load on healthy connections; then, through the upstream's answers, two open
provider breakers, a connection cooling down on an upstream ``Retry-After``, a terminal
(``expired``) connection, two model locks (a pair locked after consecutive transient failures,
one locked on an upstream hint) and two session leases. The second breaker opens on the last
request before the kill: SIGKILL follows the moment its answer arrives. A new gateway process on
the same data must then show every one of them as before (same cooldown end, same lock end,
breakers still OPEN, leases once each, a new owner gets a connection nobody holds).

"Under load" is made certain, not left to timing: one held request, on an upstream of its own
that answers only after ``HOLD_MS``, is seen to reach that upstream before the kill and must be
cut by it. The background load may or may not have a request in flight at that instant.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from omniroute.tools.fakeupstream import FakeUpstream
from omniroute.tools.restart.infra import (
    GatewayProcess,
    Load,
    Services,
    data_dir,
    postgres_database,
    prepared_env,
    redis_prefix,
)
from omniroute.tools.restart.state import Scenario, Snapshot, compare, lease_rows, snapshot

# Long enough that nothing set before the kill ends before the comparison after the restart.
SETTINGS = {
    "providerBreaker": {"local": {"resetTimeoutMs": 600_000}},
    "attempts": {"retriesPerTarget": 0},  # each upstream call is one the resilience layer judges
    # a self-set lock starts at the base and doubles per failed probe up to the cap
    "availability": {"transientCooldownBaseMs": 60_000, "transientCooldownCapMs": 300_000},
}
HINT_SECONDS = 900
LOAD_LATENCY_MS = 100  # each load request is in flight that long
HOLD_MS = 60_000  # the held request's upstream answers this late: the kill comes first
AFTER_REQUESTS = 100  # served by the restarted process, every one must succeed
DOWN = {"status": 503}
MESSAGES = [{"role": "user", "content": "hi"}]
OWNER_HEADER = "x-omniroute-lease-owner"


@dataclass
class Outcome:
    """What one mode's run saw."""

    mode: str
    problems: list[str] = field(default_factory=list)
    checked: int = 0
    load_ok: int = 0
    load_failed: int = 0
    load_reasons: dict[str, int] = field(default_factory=dict)
    after_ok: int = 0
    after_failed: int = 0
    kill_to_serving_s: float = 0.0
    seconds: float = 0.0
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.problems


class Operator:
    """The management API of one gateway process."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.api = httpx.Client(
            base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=15
        )

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        answer = self.api.post(path, json=payload)
        if answer.status_code != 201:
            raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text}")
        return dict(answer.json())

    def get(self, path: str) -> Any:
        answer = self.api.get(path)
        if answer.status_code != 200:
            raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text}")
        return answer.json()

    def close(self) -> None:
        self.api.close()


def _provider(
    op: Operator,
    fake: FakeUpstream,
    label: str,
    *connections: dict[str, Any],
    category: str = "api_key",
    per_model_quota: bool = True,
    disable_cooling: bool = False,
) -> tuple[str, list[int]]:
    """A provider with one connection per knob set; its slug and connection ids."""
    slug = f"rs-{label}-{secrets.token_hex(3)}"
    op.post(
        "/api/providers/",
        {
            "slug": slug,
            "name": slug,
            "category": category,
            "base_url": fake.base_url(),
            "per_model_quota": per_model_quota,
        },
    )
    ids = []
    for n, knobs in enumerate(connections, start=1):
        base = fake.base_url(**knobs) if knobs else fake.base_url()
        connection = op.post(
            "/api/connections/",
            {
                "provider": slug,
                "name": f"c{n}",
                "priority": n,
                "base_url": base,
                "secret": f"sk-upstream-restart-{n}-0123456789",
                "disable_cooling": disable_cooling,
            },
        )
        ids.append(int(connection["id"]))
    return slug, ids


def _key(op: Operator, name: str, models: list[str], **fields: Any) -> str:
    return str(op.post("/api/keys/", {"name": name, "allowed_models": models, **fields})["key"])


def configure(op: Operator, fake: FakeUpstream, holder: FakeUpstream) -> Scenario:
    """The providers, connections and keys of one run (``holder``: the held request's
    upstream)."""
    answer = op.api.patch("/api/resilience", json=SETTINGS)
    if answer.status_code != 200:
        raise RuntimeError(f"PATCH /api/resilience: {answer.status_code} {answer.text}")
    slow = {"latency_ms": LOAD_LATENCY_MS}
    load, _ = _provider(op, fake, "load", slow, slow)
    breaker_a, _ = _provider(op, fake, "brka", DOWN, DOWN, category="local", disable_cooling=True)
    breaker_b, _ = _provider(op, fake, "brkb", DOWN, DOWN, category="local", disable_cooling=True)
    hinted = {"status": 429, "retry_after": HINT_SECONDS}
    cool, cool_ids = _provider(op, fake, "cool", hinted, per_model_quota=False)
    term, term_ids = _provider(op, fake, "term", {"status": 401})
    flaky, flaky_ids = _provider(op, fake, "flaky", DOWN)
    hint, hint_ids = _provider(op, fake, "hint", hinted)
    lease, lease_ids = _provider(op, fake, "lease", {}, {}, {})
    held, _ = _provider(op, holder, "held", {"latency_ms": HOLD_MS})
    providers = [load, breaker_a, breaker_b, cool, term, flaky, hint, lease, held]
    client = _key(op, "restart-client", [f"{p}/*" for p in providers])
    managed = _key(
        op,
        "restart-agent",
        [f"{lease}/*"],
        scopes=["lease:exclusive"],
        allowed_connections=lease_ids,
    )
    owned = {c: p for p, ids in ((cool, cool_ids), (term, term_ids)) for c in ids}
    return Scenario(
        providers=owned,
        client_key=client,
        managed_key=managed,
        load_model=f"{load}/m",
        held_model=f"{held}/m",
        breakers=(breaker_a, breaker_b),
        cooled=cool_ids[0],
        terminal=term_ids[0],
        locked=((flaky, flaky_ids[0], "m"), (hint, hint_ids[0], "m")),
        lease_model=f"{lease}/m",
        lease_connections=tuple(lease_ids),
    )


def ask(url: str, key: str, model: str) -> httpx.Response:
    with httpx.Client(headers={"authorization": f"Bearer {key}"}, timeout=15) as client:
        body = {"model": model, "messages": MESSAGES}
        return client.post(f"{url}/v1/chat/completions", json=body)


class HeldRequest:
    """One request whose upstream answers after ``HOLD_MS``: in flight until the kill cuts it."""

    def __init__(self, url: str, key: str, model: str, holder: FakeUpstream) -> None:
        self.holder = holder
        self.error: BaseException | None = None
        self.answer: httpx.Response | None = None
        self._thread = threading.Thread(target=self._send, args=(url, key, model), daemon=True)

    def _send(self, url: str, key: str, model: str) -> None:
        try:
            with httpx.Client(headers={"authorization": f"Bearer {key}"}, timeout=120) as client:
                body = {"model": model, "messages": MESSAGES}
                self.answer = client.post(f"{url}/v1/chat/completions", json=body)
        except httpx.HTTPError as error:
            self.error = error

    def start(self) -> HeldRequest:
        self._thread.start()
        if not self.holder.wait_for(lambda fake: fake.requests, timeout=15):
            raise RuntimeError("the held request did not reach its upstream within 15 s")
        return self

    def outcome(self) -> str | None:
        """After the kill: None when it was cut, else what happened to it."""
        self._thread.join(timeout=15)
        if isinstance(self.error, httpx.TransportError):
            return None
        if self.answer is not None:
            return f"answered {self.answer.status_code} {self.answer.text[:200]}"
        return f"ended with {self.error!r}" if self.error else "still waiting 15 s after the kill"


def lease_call(url: str, key: str, owner: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}", OWNER_HEADER: owner}
    return httpx.post(f"{url}/api/v1/session-leases", json=body, headers=headers, timeout=15)


def _expect(problems: list[str], what: str, answer: httpx.Response, status: int) -> None:
    if answer.status_code != status:
        problems.append(f"{what}: expected {status}, got {answer.status_code} {answer.text[:200]}")


def drive(url: str, sc: Scenario, problems: list[str]) -> None:
    """Everything but the last breaker, through the upstream's answers and the lease API."""
    a, b = sc.breakers
    for n in (1, 2):  # two calls, two connections each: the second opens it (module doc)
        _expect(problems, f"breaker {a} call {n}", ask(url, sc.client_key, f"{a}/m"), 503)
    _expect(problems, f"breaker {b} call 1", ask(url, sc.client_key, f"{b}/m"), 503)
    cooled, terminal = (sc.provider_of(sc.cooled), sc.provider_of(sc.terminal))
    _expect(problems, "hinted 429", ask(url, sc.client_key, f"{cooled}/m"), 429)
    _expect(problems, "401", ask(url, sc.client_key, f"{terminal}/m"), 502)  # upstream_auth_failed
    (flaky, _, model), (hint, _, hint_model) = sc.locked
    for n in range(3):  # availability.consecutiveFailures (3) transient failures in a row
        _expect(problems, f"transient {n + 1}", ask(url, sc.client_key, f"{flaky}/{model}"), 503)
    _expect(problems, "hinted pair 429", ask(url, sc.client_key, f"{hint}/{hint_model}"), 429)
    for _ in range(2):
        owner = "vlo_" + secrets.token_urlsafe(32)
        answer = lease_call(
            url, sc.managed_key, owner, {"action": "acquire", "model": sc.lease_model}
        )
        _expect(problems, "lease acquire", answer, 200)
        if answer.status_code == 200:
            sc.owners[owner] = int(answer.json()["generation"])


def _wait(what: str, ready: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not seen within {timeout} s")
        time.sleep(0.1)


def run_mode(mode: str, services: Services | None, workdir: Path) -> Outcome:
    """One run: ``embedded`` (``services`` is None) or ``services`` (PostgreSQL + Redis)."""
    outcome, started = Outcome(mode), time.monotonic()
    with ExitStack() as stack:
        path = stack.enter_context(data_dir())
        overrides: dict[str, str] = {}
        if services is not None:
            overrides["DATABASE_URL"] = stack.enter_context(postgres_database(services.pg_url))
            overrides["REDIS_URL"] = services.redis_url
            overrides["OMNIROUTE_REDIS_PREFIX"] = stack.enter_context(
                redis_prefix(services.redis_url)
            )
        env, manage_key = prepared_env(path, overrides)
        fake = stack.enter_context(FakeUpstream(record=False).start())
        holder = stack.enter_context(FakeUpstream().start())
        log = workdir / f"restarttest-{mode}.log"
        first = GatewayProcess(env, log)
        stack.callback(first.stop)
        first.start()
        op = Operator(first.url, manage_key)
        stack.callback(op.close)
        sc = configure(op, fake, holder)
        load = Load(first.url, sc.client_key, sc.load_model).start()
        stack.callback(load.stop)
        held = HeldRequest(first.url, sc.client_key, sc.held_model, holder).start()
        drive(first.url, sc, outcome.problems)
        _wait("breaker OPEN", lambda: snapshot(op, sc).breaker_state(sc.breakers[0]) == "open")
        before = snapshot(op, sc)
        # The last millisecond: the call that opens the second breaker, then SIGKILL at once.
        last = ask(first.url, sc.client_key, f"{sc.breakers[1]}/m")
        first.kill(then=load.halt)  # what was in flight is cut; nothing new goes to a dead port
        killed_at = time.monotonic()
        _expect(outcome.problems, "breaker opening call", last, 503)
        if "provider_circuit_open" in last.text:  # refused by a breaker already open
            outcome.problems.append(f"the last call did not reach the upstream: {last.text}")
        outcome.load_ok, outcome.load_failed = load.stop()
        outcome.load_reasons = dict(load.reasons)
        if (held_outcome := held.outcome()) is not None:
            outcome.problems.append(f"the held request was not cut by the kill: {held_outcome}")
        if outcome.load_ok == 0 or outcome.load_failed > load.workers:
            # Failed: at most what was in flight at the kill.
            outcome.problems.append(
                f"load before the kill: {outcome.load_ok} answered, {outcome.load_failed} "
                f"failed {outcome.load_reasons}"
            )

        second = GatewayProcess(env, log)
        stack.callback(second.stop)
        second.start()
        outcome.kill_to_serving_s = time.monotonic() - killed_at
        op2 = Operator(second.url, manage_key)
        stack.callback(op2.close)
        after = snapshot(op2, sc)
        outcome.checked = compare(before, after, sc, outcome.problems)
        outcome.checked += check_leases(second.url, sc, after, outcome.problems)
        rows = lease_rows(env, path, sc)
        outcome.checked += 1
        if rows.duplicated or rows.active != len(sc.lease_connections):
            outcome.problems.append(f"lease rows: {rows}")
        after_load = Load(second.url, sc.client_key, sc.load_model, max_requests=AFTER_REQUESTS)
        outcome.after_ok, outcome.after_failed = after_load.start().wait()
        if outcome.after_failed:
            outcome.problems.append(f"{outcome.after_failed} requests failed after the restart")
    outcome.seconds = time.monotonic() - started
    return outcome


def check_leases(url: str, sc: Scenario, after: Snapshot, problems: list[str]) -> int:
    """Each owner gets its own lease again (same generation, no second row); a new owner gets
    the connection nobody holds; the next one a 429."""
    checked = 0
    for owner, generation in sc.owners.items():
        again = lease_call(
            url, sc.managed_key, owner, {"action": "acquire", "model": sc.lease_model}
        )
        checked += 1
        if again.status_code != 200 or again.json().get("generation") != generation:
            problems.append(f"lease re-acquire: {again.status_code} {again.text[:200]}")
    held = [repr(lease.get("connection")) for lease in after.leases.values()]
    newcomer = "vlo_" + secrets.token_urlsafe(32)
    grant = lease_call(
        url, sc.managed_key, newcomer, {"action": "acquire", "model": sc.lease_model}
    )
    checked += 1
    _expect(problems, "a new owner's acquire", grant, 200)
    if grant.status_code == 200:
        generation = grant.json()["generation"]
        status = lease_call(
            url, sc.managed_key, newcomer, {"action": "status", "generation": generation}
        )
        given = repr(status.json().get("connection"))
        if given in held:
            problems.append(f"a new owner was given {given}, which another owner holds")
    refused = lease_call(
        url,
        sc.managed_key,
        "vlo_" + secrets.token_urlsafe(32),
        {"action": "acquire", "model": sc.lease_model},
    )
    checked += 1
    _expect(problems, "acquire with every connection held", refused, 429)
    return checked


__all__ = ["Outcome", "Services", "Snapshot", "run_mode"]
