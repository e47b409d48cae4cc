"""The chaos run's checks and its BENCHMARKS.md section.

The per-route availability check is :mod:`omniroute.tools.chaos.check`: a floor from the injected
faults alone (what a direct client making the calls a request can count on would get, less
3σ), every refusal of the gateway counted as a failure, and only the requests the schedule left
without any target for longer than they could wait excused, shown apart with the reason.
"""

from __future__ import annotations

import random
import textwrap
from collections import Counter

import orjson

from omniroute.tools.chaos import faults
from omniroute.tools.chaos.check import FaultSpec, RouteSpec, RouteVerdict, Sent, judge
from omniroute.tools.chaos.client import OK, VIOLATIONS
from omniroute.tools.chaos.run import (
    DOWN,
    OUTAGE,
    OUTAGE_MIN_SECONDS,
    REDIS_BACK,
    REDIS_KILL,
    SETTINGS,
    TERMINAL,
    ChaosResult,
)


def fault_spec() -> FaultSpec:
    """The schedule's faults as the check reads them, the hints taken from the 429s' knobs."""
    knobs = [fault.knobs(random.Random(0)) for fault in faults.FAULTS]
    hints = tuple(float(k["retry_after"]) for k in knobs if "retry_after" in k)
    return FaultSpec(faults.FAULT_RATE, faults.MID_RATE, hints, DOWN)


def _sent(issued: list[tuple[str, float]], outage: tuple[float, float] | None) -> list[Sent]:
    """Each request's outcome, with the seconds of the outage still to come at its issue."""
    start, end = outage or (0.0, 0.0)
    return [Sent(outcome, end - at if start <= at < end else 0.0) for outcome, at in issued]


def verdicts(result: ChaosResult) -> list[RouteVerdict]:
    """Every route and mode the load used, judged (:func:`omniroute.tools.chaos.check.judge`)."""
    specs = {route.name: RouteSpec(route.name, route.models) for route in result.routes}
    spec = fault_spec()
    return [
        judge(specs[name], stream, _sent(issued, result.outage), spec, result.caps)
        for (name, stream), issued in sorted(result.load.issued.items())
    ]


def terminal_connections(result: ChaosResult) -> list[str]:
    return [
        f"{c['name']}: {c['test_status']}"
        for c in result.connections
        if c.get("test_status") in TERMINAL
    ]


def failures(result: ChaosResult) -> list[str]:
    """Why the run fails its checks; empty when it passes."""
    reasons = []
    judged = verdicts(result)
    issued = sum(v.requests for v in judged)
    if issued < result.plan.requests:
        reasons.append(f"only {issued} of {result.plan.requests} requests within the duration")
    if result.violations:
        kinds = Counter(v.outcome for _, v in result.violations)
        reasons.append("violations: " + ", ".join(f"{k} × {n}" for k, n in sorted(kinds.items())))
    for verdict in judged:
        reasons.extend(verdict.reasons)
    down = next((n for n in result.seen.breakers if n.startswith("chaos-a-")), None)
    if down is None or "open" not in result.seen.breakers[down]:
        reasons.append(f"the breaker of the provider serving {DOWN} never opened in its outage")
    if result.recovered_after is None:
        reasons.append(
            f"not recovered within {result.plan.recovery_seconds:.0f} s: "
            f"breakers {result.final_breakers}, {result.lockouts_left} lockouts, "
            f"store {result.final_store}"
        )
    if not result.seen.store_degraded_seen:
        reasons.append("health never showed the store degraded while Redis was down")
    if terminal := terminal_connections(result):
        reasons.append("terminal connections: " + ", ".join(terminal))
    if not result.gateway_alive:
        reasons.append("the gateway process died")
    return reasons


def _row(v: RouteVerdict) -> str:
    outcomes = v.judged + v.excused
    shown = sorted((k, n) for k, n in v.judged.items() if k != OK and k not in VIOLATIONS)
    errors = ", ".join(f"`{k}` × {n}" for k, n in shown) or "—"
    violations = sum(n for k, n in outcomes.items() if k in VIOLATIONS)
    refused = v.refused / v.judged.total() if v.judged else 0.0
    return (
        f"| {v.route.name} | {v.mode} | {v.requests} | {v.excused.total()} | {v.judged[OK]} "
        f"| {errors} | {refused:.2%} | {violations} | {v.targets_counted} | {v.bound:.2%} "
        f"| {v.floor:.2%} | **{v.success:.2%}** | {'pass' if v.passed else 'FAIL'} |"
    )


def _excused(judged: list[RouteVerdict]) -> list[str]:
    """One line per route (both modes): how many requests were excused, which, and why."""
    lines = []
    for name in dict.fromkeys(v.route.name for v in judged):
        modes = [v for v in judged if v.route.name == name]
        excused = sum((v.excused for v in modes), Counter[str]())
        shown = ", ".join(f"`{k}` × {n}" for k, n in sorted(excused.items()))
        which = f" ({shown})" if shown else ""
        lines.append(f"- {name}: {excused.total()} excused{which}; {modes[0].excuse}.")
    return lines


def report(result: ChaosResult) -> str:
    """The outcome table, the timeline, breakers, store and connections, and the verdict."""
    all_outcomes: Counter[str] = Counter()
    for counts in result.outcomes.values():
        all_outcomes.update(counts)
    kinds = Counter(v.outcome for _, v in result.violations)
    judged = verdicts(result)
    lines = [
        "| route | mode | requests | excused | success | clear errors (judged) "
        "| refused (judged) | violations | targets counted | direct-client bound "
        "| floor (bound − 3σ) | measured (judged) | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(v) for v in judged),
        "",
        "Excused (not judged: the schedule left every target down longer than the request "
        f"could wait; wait caps {result.caps.single_ms} ms single model, "
        f"{result.caps.combo_ms} ms combo, deadline {result.caps.deadline_ms} ms):",
        *_excused(judged),
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
    breakers = "; ".join(
        f"{name}: {' → '.join(states)}" for name, states in sorted(result.seen.breakers.items())
    )
    recovered = (
        "never"
        if result.recovered_after is None
        else f"{result.recovered_after:.1f} s into the recovery phase"
    )
    states = Counter(str(c.get("test_status")) for c in result.connections)
    others = sorted(
        n
        for n, seen in result.seen.breakers.items()
        if "open" in seen and not n.startswith("chaos-a-")
    )
    lines += [
        f"Breakers seen (health polled every 0.3 s): {breakers}. All CLOSED, no lockout left "
        f"and the store back on Redis: {recovered} ({sum(result.recovery.values())} healthy "
        f"requests, {result.recovery[OK]} answered). Store degraded while Redis was down: "
        f"{'yes' if result.seen.store_degraded_seen else 'no'}; at the end: "
        f"{result.final_store.get('backend')}, degraded={result.final_store.get('degraded')}. "
        f"Breakers that opened besides the outage's (random faults only, no check): "
        f"{', '.join(_with_reasons(result, others)) or 'none'}.",
        f"Connections at the end ({len(result.connections)}): "
        + ", ".join(f"{s} × {n}" for s, n in sorted(states.items()))
        + f"; terminal (banned, expired, credits_exhausted): "
        f"{', '.join(terminal_connections(result)) or 'none'}.",
    ]
    reasons = failures(result)
    lines.append("\nResult: " + ("pass." if not reasons else "FAIL: " + "; ".join(reasons)))
    return "\n".join(lines)


def _with_reasons(result: ChaosResult, names: list[str]) -> list[str]:
    """Each breaker's name with why it opened (its transition history's reasons)."""
    described = []
    for name in names:
        reasons = [r for _, r in sorted(result.seen.openings.get(name, {}).items())]
        described.append(f"{name} ({'; '.join(reasons)})" if reasons else name)
    return described


def _fault_table(result: ChaosResult) -> str:
    calls = result.upstream.get("chat", 0)
    rows = [f"| {f.name} | {f.share:.0%} | {result.injected[f.name]} |" for f in faults.FAULTS]
    rows.append(
        f"| (no fault) latency {faults.LATENCY_MS[0]}–{faults.LATENCY_MS[1]} ms "
        f"| {faults.LATENCY_SHARE * (1 - faults.FAULT_RATE):.1%} "
        f"| {result.injected['latency']} |"
    )
    return "\n".join(
        [
            f"| fault | share of calls | of the run's {calls} upstream calls |",
            "|---|---|---|",
            *rows,
        ]
    )


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
        f"Floor: each call fails with p = {p:.2f}, q = {q:.2f} of it mid-answer (after the "
        "first content). A direct client making the calls a request can count on gets, for a "
        "JSON request, 1 − p^k (it fails only if every target fails); for a stream, which "
        "commits to the first call that does not fail before its answer and so also fails "
        "when that call breaks mid-answer, (1 − p)/(1 − p + q) · (1 − (p − q)^k). k counts the "
        "targets the outage spares (combos 2, single models 1); retries only add calls. The "
        "floor is that bound less 3σ (σ of a binomial rate over the route's judged requests): "
        "it comes from the injected faults alone. Every refusal of the gateway "
        "(`all_targets_cooling_down`, `provider_circuit_open`, a 429) is a failure like any "
        "other error; a request is excused (not judged) only when the schedule left every "
        "target of its route down for longer than it could wait: issued during the outage "
        "with more of it to come than its wait cap (`attempts.maxRetryAfterWaitMs` for a "
        "single model, `comboCooldownWait.maxWaitMs` for a combo, at most the deadline). The "
        f"schedule's `Retry-After: {faults.RETRY_AFTER_SECONDS}` is within both caps, so it "
        "excuses nothing. Success means the exact text of the fake's answer, with one finish "
        "and one `[DONE]` on a stream."
    )
    parts = [
        title,
        _fill(intro) + "\n" + changed,
        _fault_table(result),
        _fill(formula),
        report(result),
    ]
    return "\n\n".join(parts) + "\n"
