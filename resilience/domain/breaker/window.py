"""The breaker's failure-rate window, pure.

The window opens with the first breaker-relevant event and lasts ``span`` seconds; while it is
open every call of the provider is counted, so a healthy provider (no window) costs nothing.
The event that opens it is why counting starts, not one of its calls: every window would
otherwise begin with a failure, and a provider failing 10 % of its calls would trip a 50 %
rate over 10 calls about once in 115 windows instead of once in 600.
It trips when at least ``minimum_calls`` calls were made, some succeeded, and at least
``rate_percent`` of them failed in ways not pinned to one (connection, model) pair (an unbroken
run of failures is the consecutive thresholds' business). ``sources`` remembers which pairs
answered 5xx recently: a 5xx counts for the breaker only once a second pair has failed too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SOURCES_LIMIT = 16  # distinct failing pairs remembered per provider


@dataclass(frozen=True, slots=True)
class FailureWindow:
    """Calls and breaker-relevant failures since ``started_at``; times in epoch seconds."""

    started_at: float | None = None
    calls: int = 0
    failures: int = 0
    sources: Mapping[str, float] = field(default_factory=dict)

    def active(self, now: float, span: float) -> bool:
        return self.started_at is not None and now - self.started_at < span

    def live(self, now: float, span: float) -> FailureWindow:
        """This window while it lasts, else a fresh one starting now."""
        if self.active(now, span):
            return self
        return FailureWindow(started_at=now)

    def with_call(self, now: float, span: float, *, failed: bool) -> FailureWindow:
        """This call counted in the live window; a call that opens a window only opens it."""
        if not self.active(now, span):
            return FailureWindow(started_at=now)
        return replace(self, calls=self.calls + 1, failures=self.failures + int(failed))

    def with_source(self, source: str, now: float, span: float) -> tuple[FailureWindow, bool]:
        """Remember a 5xx from ``source``; True when another source failed within the span."""
        recent = {s: at for s, at in self.sources.items() if now - at < span and s != source}
        others = bool(recent)
        recent[source] = now
        kept = dict(sorted(recent.items(), key=lambda item: item[1])[-SOURCES_LIMIT:])
        return replace(self, sources=kept), others

    def tripped(self, minimum_calls: int, rate_percent: int) -> bool:
        """Enough calls, and enough of them failed, among successes: an unbroken run of
        failures is judged by the consecutive thresholds (the reference's worked examples)."""
        mixed = self.failures < self.calls
        enough = self.calls >= minimum_calls
        return mixed and enough and self.failures * 100 >= rate_percent * self.calls

    def to_dict(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at,
            "calls": self.calls,
            "failures": self.failures,
            "sources": dict(self.sources),
        }

    @classmethod
    def from_dict(cls, raw: object) -> FailureWindow:
        if not isinstance(raw, Mapping):
            return cls()
        started, sources = raw.get("started_at"), raw.get("sources")
        return cls(
            started_at=float(started) if isinstance(started, int | float) else None,
            calls=_count(raw.get("calls")),
            failures=_count(raw.get("failures")),
            sources={
                str(k): float(v)
                for k, v in (sources.items() if isinstance(sources, Mapping) else ())
                if isinstance(v, int | float)
            },
        )


def _count(raw: object) -> int:
    return max(0, int(raw)) if isinstance(raw, int | float) and not isinstance(raw, bool) else 0
