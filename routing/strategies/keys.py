"""The execution key of a target (pure): what a combo's strategies count, rank and remember
a target by."""

from __future__ import annotations

from routing.domain.plan.planning import Target


def execution_key(target: Target) -> str:
    """The key of ``target`` within its combo (a quota-share deficit, a metrics record, a
    strict-random card): ``<connection id>:<model>``."""
    return f"{target.connection.id}:{target.model}"
