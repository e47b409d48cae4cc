"""Priority combos' fallback-only steps: a step flagged
``fallback_only_on_quota_exhaustion`` is tried only once an earlier target of the request ran
out of quota (failed with a quota timer, or was skipped for one). Any other failure of the
earlier targets leaves it out, and their own error is the answer.
"""

from __future__ import annotations

from resilience.domain.attribution import TimerClass
from routing.domain.config.vocabulary import ExclusionReason, Strategy
from routing.domain.plan.planning import Target
from routing.proxy.context import AttemptContext, Exclusion


class FallbackOnlyFilter:
    """Excludes a fallback-only step's targets until quota ran out on an earlier one."""

    async def exclude(self, target: Target, context: AttemptContext) -> Exclusion | None:
        plan = context.plan
        if plan.combo is None or plan.strategy != Strategy.PRIORITY:
            return None
        combo = context.facts.snapshot.combos.get(plan.combo)
        if combo is None or not combo.steps[target.step].fallback_only_on_quota_exhaustion:
            return None
        if _quota_ran_out(context):
            return None
        return Exclusion(target, ExclusionReason.FALLBACK_ONLY, None, TimerClass.OPERATOR)


def _quota_ran_out(context: AttemptContext) -> bool:
    if any(e.timer == TimerClass.QUOTA for e in context.loop.exclusions):
        return True
    for target, outcome in context.loop.attempts:
        verdict = context.loop.verdict(target)
        if not outcome.ok and verdict is not None and verdict.attribution.timer is TimerClass.QUOTA:
            return True
    return False
