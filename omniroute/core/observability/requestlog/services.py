"""The request log's one write path: batches of records in, old rows out.

A batch is a few multi-row ``INSERT`` statements over plain tuples, with the values adapted by
the database backend as the ORM would: building a model instance per row cost the writer
thread, and so the gateway's process, about as much CPU as the request it logs; running one
statement per row (``executemany``) made the writer thread and the event loop trade the
interpreter's lock once per row.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import CharField
from django.db.models.constants import OnConflict

from omniroute.core.observability.requestlog.models import RECORDED, RequestLogEntry
from omniroute.core.observability.requestlog.record import RequestRecord


@cache
def _limits() -> dict[str, int]:
    """Each text column's length (a client may name a model of any length)."""
    return {
        field.name: field.max_length
        for field in RequestLogEntry._meta.get_fields()
        if isinstance(field, CharField) and field.max_length
    }


# The largest number of rows one statement inserts (the backend may allow fewer: SQLite's bound
# on a statement's parameters). One statement per so many rows, not one per row: each statement
# hands the interpreter's lock back and forth once, where ``executemany`` did it for every row,
# and under load the gateway's event loop paid for each hand-over.
ROWS_PER_STATEMENT = 200


@cache
def _insert_sql(vendor: str, rows: int) -> str:
    """The ``INSERT`` of ``rows`` rows, skipping a request id already logged (``vendor`` keys the
    cache: the statement depends on the backend)."""
    del vendor
    ops, quote = connection.ops, connection.ops.quote_name
    fields = [RequestLogEntry._meta.get_field(name) for name in RECORDED]
    suffix = ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)
    row = f"({', '.join(['%s'] * len(RECORDED))})"
    return (
        f"{ops.insert_statement(on_conflict=OnConflict.IGNORE)} "
        f"{quote(RequestLogEntry._meta.db_table)} "
        f"({', '.join(quote(name) for name in RECORDED)}) "
        f"VALUES {', '.join([row] * rows)} {suffix}"
    ).rstrip()


def _values(record: RequestRecord, ops: BaseDatabaseOperations) -> tuple[Any, ...]:
    """The record's row, in :data:`RECORDED`'s order, adapted by ``ops`` as the ORM would."""
    limit = _limits()
    started_at = datetime.fromtimestamp(record.started_at, UTC)
    row = {
        "request_id": record.request_id[: limit["request_id"]],
        "started_at": ops.adapt_datetimefield_value(started_at),
        "key_name": record.key_name[: limit["key_name"]],
        "key_prefix": record.key_prefix[: limit["key_prefix"]],
        "endpoint": record.endpoint[: limit["endpoint"]],
        "model": record.model[: limit["model"]],
        "provider": record.provider[: limit["provider"]],
        "target_model": record.target_model[: limit["target_model"]],
        "connection_id": record.connection_id,
        "connection_name": record.connection_name[: limit["connection_name"]],
        "status": record.status,
        "error_code": record.error_code[: limit["error_code"]],
        "latency_ms": max(0, record.latency_ms),
        "time_to_first_token_ms": record.time_to_first_token_ms,
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "attempts": record.attempts,
        "trail": ops.adapt_json_value([step.as_json() for step in record.trail], None),
    }
    return tuple(row[column] for column in RECORDED)


def request_log_write(*, records: Iterable[RequestRecord]) -> int:
    """Write a batch of finished requests, many rows per statement; how many records it was
    given (a request id already logged is skipped)."""
    ops = connection.ops
    rows = [_values(record, ops) for record in records]
    if rows:
        fields = [RequestLogEntry._meta.get_field(name) for name in RECORDED]
        per = max(1, min(ROWS_PER_STATEMENT, ops.bulk_batch_size(fields, rows)))
        # One transaction: one commit (and one sync to disk) per batch, not per row.
        with transaction.atomic(), connection.cursor() as cursor:
            for start in range(0, len(rows), per):
                chunk = rows[start : start + per]
                params = [value for row in chunk for value in row]
                cursor.execute(_insert_sql(connection.vendor, len(chunk)), params)
    return len(rows)


def request_log_prune(*, now: datetime, max_age: timedelta, max_rows: int) -> int:
    """Delete the rows older than ``max_age`` and all but the newest ``max_rows``; how many
    went."""
    deleted, _ = RequestLogEntry.objects.filter(started_at__lt=now - max_age).delete()
    newest = RequestLogEntry.objects.order_by("-started_at", "-id")
    boundary = newest.values_list("started_at", "id")[max_rows : max_rows + 1].first()
    if boundary is not None:
        at, row_id = boundary
        older = RequestLogEntry.objects.filter(started_at__lt=at) | RequestLogEntry.objects.filter(
            started_at=at, id__lte=row_id
        )
        deleted += older.delete()[0]
    return deleted
