"""``manage.py recheck_expired``: one pass of the expired OAuth re-check, reported line by line.

The gateway runs the same pass every minute by itself. Run from its own process, the command
clears the database row and the state store it can reach: with the in-memory store (no
``REDIS_URL``) a running gateway keeps its own live state for the connection.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from routing.services.expired import (
    EXPIRED_RETRY_MAX,
    Recheck,
    RecheckOutcome,
    expired_recheck_pass,
)


def _line(result: Recheck) -> str:
    attempt = f"re-check {result.retry_count}/{EXPIRED_RETRY_MAX} failed"
    match result.outcome:
        case RecheckOutcome.RECOVERED:
            detail = "recovered, active again"
        case RecheckOutcome.RETRY_SCHEDULED:
            assert result.retry_at is not None
            when = timezone.localtime(result.retry_at).isoformat(timespec="seconds")
            detail = f"still expired ({attempt}, next at {when})"
        case RecheckOutcome.GAVE_UP:
            detail = f"still expired ({attempt}, no more re-checks)"
        case _:
            detail = "skipped (no longer due, or another process re-checks it)"
    return f"{result.label}: {detail}"


class Command(BaseCommand):
    help = "Re-check expired OAuth connections that are due once, and print what happened."

    def handle(self, *args: Any, **options: Any) -> None:
        results = expired_recheck_pass(now=timezone.now())
        for result in results:
            self.stdout.write(_line(result))
        self.stdout.write(f"Re-checked {len(results)} expired connection(s).")
