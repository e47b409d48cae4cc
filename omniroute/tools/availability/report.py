"""The availability report: a row per scenario against its bar, and the BENCHMARKS.md section."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Final

from omniroute.tools.availability.scenarios import (
    COOLING,
    SECTION_TITLE,
    LoadPlan,
    ScenarioResult,
    direct_baseline,
)

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
