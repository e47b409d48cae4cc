"""The chaos run's checks and its BENCHMARKS.md section.

The success bound per route and mode is :func:`routing.chaos.faults.success_bound` with the
targets a request can count on: a combo has three, one of which is down through the outage, so
two; a single model one. Refusals with a ``Retry-After`` (``all_targets_cooling_down``,
``provider_circuit_open``, as a 503 or in-band after a keep-alive) are what the spec answers
while every target of the request is behind a timer it may not look past (an upstream hint, an
open breaker, a probe in flight: decisions 15 and 20); they are clear errors, and the check
allows them on top of the bound, as measured. So what it checks is that the other failures
stay within what the faults allow: success + refusals ≥ bound − 3σ, σ the standard deviation
of a binomial rate over the route's requests.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass
from typing import Final

import orjson

from routing.chaos import faults
from routing.chaos.client import OK, VIOLATIONS
from routing.chaos.run import (
    DOWN,
    OUTAGE,
    OUTAGE_MIN_SECONDS,
    REDIS_BACK,
    REDIS_KILL,
    SETTINGS,
    TERMINAL,
    ChaosResult,
)

# As an error status, or in-band after a keep-alive began the stream (a combo's cooldown wait).
REFUSALS: Final = tuple(
    f"{where} {code}"
    for where in ("503", "stream")
    for code in ("all_targets_cooling_down", "provider_circuit_open")
)


@dataclass(frozen=True, slots=True)
class RouteFigures:
    """One route in one mode: its answers against its bound."""

    route: str
    stream: bool
    targets: int
    outcomes: Counter[str]

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values())

    @property
    def counted_targets(self) -> int:
        """The targets a request can count on: a combo's first one is down for a while."""
        return self.targets - 1 if self.targets > 1 else 1

    @property
    def success(self) -> float:
        return self.outcomes[OK] / self.requests if self.requests else 0.0

    @property
    def bound(self) -> float:
        return faults.success_bound(self.counted_targets, self.stream)

    @property
    def allowance(self) -> float:
        refused = sum(self.outcomes[r] for r in REFUSALS)
        return refused / self.requests if self.requests else 0.0

    @property
    def floor(self) -> float:
        return self.bound - self.allowance - faults.margin(self.bound, self.requests)

    @property
    def errors(self) -> Counter[str]:
        return Counter({k: n for k, n in self.outcomes.items() if k != OK and k not in VIOLATIONS})

    @property
    def violations(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k in VIOLATIONS)


def figures(result: ChaosResult) -> list[RouteFigures]:
    targets = {route.name: route.targets for route in result.routes}
    return [
        RouteFigures(name, stream, targets[name], counts)
        for (name, stream), counts in sorted(result.outcomes.items())
    ]


def terminal_connections(result: ChaosResult) -> list[str]:
    return [f"{c['name']}: {c['test_status']}" for c in result.connections
            if c.get("test_status") in TERMINAL]  # fmt: skip


def failures(result: ChaosResult) -> list[str]:
    """Why the run fails its checks; empty when it passes."""
    reasons = []
    issued = sum(f.requests for f in figures(result))
    if issued < result.plan.requests:
        reasons.append(f"only {issued} of {result.plan.requests} requests within the duration")
    if result.violations:
        kinds = Counter(v.outcome for _, v in result.violations)
        reasons.append("violations: " + ", ".join(f"{k} × {n}" for k, n in sorted(kinds.items())))
    for f in figures(result):
        if f.success < f.floor:
            mode = "stream" if f.stream else "json"
            reasons.append(f"{f.route} ({mode}): {f.success:.2%} answered, below {f.floor:.2%}")
    down = next((n for n in result.seen.breakers if n.startswith("chaos-a-")), None)
    if down is None or "open" not in result.seen.breakers[down]:
        reasons.append(f"the breaker of the provider serving {DOWN} never opened in its outage")
    if result.recovered_after is None:
        reasons.append(f"not recovered within {result.plan.recovery_seconds:.0f} s: "
                       f"breakers {result.final_breakers}, {result.lockouts_left} lockouts, "
                       f"store {result.final_store}")  # fmt: skip
    if not result.seen.store_degraded_seen:
        reasons.append("health never showed the store degraded while Redis was down")
    if terminal := terminal_connections(result):
        reasons.append("terminal connections: " + ", ".join(terminal))
    if not result.gateway_alive:
        reasons.append("the gateway process died")
    return reasons


def _row(f: RouteFigures) -> str:
    errors = ", ".join(f"`{k}` × {n}" for k, n in sorted(f.errors.items())) or "—"
    return (
        f"| {f.route} | {'stream' if f.stream else 'json'} | {f.requests} | {f.outcomes[OK]} "
        f"| {errors} | {f.violations} | {f.counted_targets} | {f.bound:.2%} | {f.allowance:.2%} "
        f"| {f.floor:.2%} | **{f.success:.2%}** |"
    )


def report(result: ChaosResult) -> str:
    """The outcome table, the timeline, breakers, store and connections, and the verdict."""
    all_outcomes: Counter[str] = Counter()
    for counts in result.outcomes.values():
        all_outcomes.update(counts)
    kinds = Counter(v.outcome for _, v in result.violations)
    lines = [
        "| route | mode | requests | success | clear errors | violations | targets counted "
        "| bound | refusal allowance | floor (bound − allowance − 3σ) | measured |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(f) for f in figures(result)),
        "",
        f"Totals: {sum(all_outcomes.values())} requests in {result.load.seconds:.1f} s, "
        f"{all_outcomes[OK]} succeeded; hangs={kinds['hang']}, "
        f"double answers={kinds['double answer']}, "
        f"truncated-as-complete={kinds['truncated as complete'] + kinds['wrong text']}, "
        f"truncated streams={kinds['truncated']}, broken bodies={kinds['broken answer']}, "
        f"500s={kinds['500']}, "
        f"unclear errors={kinds['unclear error']}, transport errors={kinds['transport error']}.",
    ]
    for where, verdict in result.violations[:10]:
        lines.append(f"- violation, {where}: {verdict.outcome}: {verdict.detail}")
    lines += ["", "Timeline:", "```", *result.seen.events, "```", ""]
    breakers = "; ".join(f"{name}: {' → '.join(states)}"
                         for name, states in sorted(result.seen.breakers.items()))  # fmt: skip
    recovered = ("never" if result.recovered_after is None
                 else f"{result.recovered_after:.1f} s into the recovery phase")  # fmt: skip
    states = Counter(str(c.get("test_status")) for c in result.connections)
    others = sorted(n for n, seen in result.seen.breakers.items()
                    if "open" in seen and not n.startswith("chaos-a-"))  # fmt: skip
    lines += [
        f"Breakers seen (health polled every 0.3 s): {breakers}. All CLOSED, no lockout left "
        f"and the store back on Redis: {recovered} ({sum(result.recovery.values())} healthy "
        f"requests, {result.recovery[OK]} answered). Store degraded while Redis was down: "
        f"{'yes' if result.seen.store_degraded_seen else 'no'}; at the end: "
        f"{result.final_store.get('backend')}, degraded={result.final_store.get('degraded')}. "
        f"Breakers that opened besides the outage's (random faults only, no check): "
        f"{', '.join(others) or 'none'}.",
        f"Connections at the end ({len(result.connections)}): "
        + ", ".join(f"{s} × {n}" for s, n in sorted(states.items()))
        + f"; terminal (banned, expired, credits_exhausted): "
        f"{', '.join(terminal_connections(result)) or 'none'}.",
    ]
    reasons = failures(result)
    lines.append("\nResult: " + ("pass." if not reasons else "FAIL: " + "; ".join(reasons)))
    return "\n".join(lines)


def _fault_table(result: ChaosResult) -> str:
    calls = result.upstream.get("chat", 0)
    rows = [f"| {f.name} | {f.share:.0%} | {result.injected[f.name]} |" for f in faults.FAULTS]
    rows.append(f"| (no fault) latency {faults.LATENCY_MS[0]}–{faults.LATENCY_MS[1]} ms "
                f"| {faults.LATENCY_SHARE * (1 - faults.FAULT_RATE):.1%} "
                f"| {result.injected['latency']} |")  # fmt: skip
    return "\n".join([
        f"| fault | share of calls | of the run's {calls} upstream calls |", "|---|---|---|", *rows,
    ])  # fmt: skip


def _fill(text: str) -> str:
    return textwrap.fill(text, 95, break_long_words=False, break_on_hyphens=False)


def section(result: ChaosResult, title: str, stamp: str) -> str:
    """The dated ``chaos`` section of BENCHMARKS.md."""
    plan = result.plan
    p, q = faults.FAULT_RATE, faults.MID_RATE
    intro = (
        f"`make chaos` (`manage.py chaos`), {stamp}, seed {plan.seed} (fault schedule "
        f"{result.digest}): {plan.requests} requests at concurrency {plan.concurrency}, "
        f"{plan.stream_share:.0%} streaming, a seeded mix of two combos of three targets "
        "(priority a→b→c, round-robin c→b→a) and two single models (`solo` on a provider of its "
        "own, `gamma` which the combos share); deadline "
        f"{plan.deadline_ms} ms per request (`X-OmniRoute-Deadline-Ms`, the client gives up 5 s "
        "later). One daphne gateway on SQLite and the run's own redis-server. Every upstream "
        "call takes the next entry of the seeded schedule; from "
        f"{OUTAGE[0]:.0%} to {OUTAGE[1]:.0%} of the load every `{DOWN}` call (provider a, "
        f"`local` profile, two connections) stalls until the gateway times out (at least "
        f"{OUTAGE_MIN_SECONDS:.0f} s); at {REDIS_KILL:.0%} the redis-server is "
        f"killed (SIGKILL), at {REDIS_BACK:.0%} started again (empty). Settings changed from "
        "the defaults, so that a bounded run sees timeouts, opens and recoveries:"
    )
    changed = f"`{orjson.dumps(SETTINGS).decode()}`"
    formula = (
        f"Success bound: each call fails with p = {p:.2f}, q = {q:.2f} of it mid-answer (after "
        "the first content). A JSON request fails only if every target fails: 1 − p^k. A stream "
        "commits to the first call that does not fail before its answer, so it also fails when "
        "that call breaks mid-answer: (1 − p)/(1 − p + q) · (1 − (p − q)^k). k counts the "
        "targets a request can rely on (combos 2, as their first target is down through the "
        "outage; single models 1); retries only add calls. Refusals with a `Retry-After` "
        "(`all_targets_cooling_down`, `provider_circuit_open`: every target of the request "
        "behind a timer the spec does not let it look past, such as an upstream hint, an open "
        "breaker or a probe in flight) are clear errors, allowed on top as measured; so the "
        "check is success + refusals ≥ bound − 3σ (σ of a binomial rate over the route's "
        "requests). Success means the exact text of the fake's answer, with one finish and one "
        "`[DONE]` on a stream. Refusals dominate the single models: a `Retry-After: 1` locks "
        "their only target for a second, and the concurrent requests of that second are "
        "refused (the spec's single-model rule: no cooldown wait)."
    )
    parts = [
        title, _fill(intro) + "\n" + changed, _fault_table(result), _fill(formula), report(result),
    ]  # fmt: skip
    return "\n\n".join(parts) + "\n"
