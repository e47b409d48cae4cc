"""The request log's one write path: batches of records in, old rows out.

A batch is one ``INSERT`` run over plain tuples (``executemany``), with the values adapted by
the database backend as the ORM would: building a model instance per row cost the writer
thread, and so the gateway's process, about as much CPU as the request it logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import cache
from operator import itemgetter
from typing import Any

from django.db import connection, transaction
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


_in_table_order = itemgetter(*RECORDED)  # a row's values from its columns, in RECORDED's order


@cache
def _insert_sql(vendor: str) -> str:
    """One row's ``INSERT``, skipping a request id already logged (``vendor`` keys the cache:
    the statement depends on the backend)."""
    del vendor
    ops, quote = connection.ops, connection.ops.quote_name
    fields = [RequestLogEntry._meta.get_field(name) for name in RECORDED]
    suffix = ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)
    return (
        f"{ops.insert_statement(on_conflict=OnConflict.IGNORE)} "
        f"{quote(RequestLogEntry._meta.db_table)} "
        f"({', '.join(quote(name) for name in RECORDED)}) "
        f"VALUES ({', '.join(['%s'] * len(RECORDED))}) {suffix}"
    ).rstrip()


def _values(record: RequestRecord) -> tuple[Any, ...]:
    """The record's row, in :data:`RECORDED`'s order, each text within its column."""
    ops, limit = connection.ops, _limits()
    started_at = datetime.fromtimestamp(record.started_at, UTC)
    trail = [step.as_json() for step in record.trail]
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
        "trail": ops.adapt_json_value(trail, None),
    }
    return _in_table_order(row)


def request_log_write(*, records: Iterable[RequestRecord]) -> int:
    """Write a batch of finished requests in one statement; how many records it was given (a
    request id already logged is skipped)."""
    rows = [_values(record) for record in records]
    if rows:
        # One transaction: one commit (and one sync to disk) per batch, not per row.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(_insert_sql(connection.vendor), rows)
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
