"""The request log's write path: batches in, and pruning that keeps the table at its bounds."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DatabaseError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from omniroute.core.observability.requestlog import services, writer
from omniroute.core.observability.requestlog.models import RECORDED, RequestLogEntry
from omniroute.core.observability.requestlog.record import RequestRecord, StepKind, TrailStep
from omniroute.core.observability.requestlog.services import request_log_prune, request_log_write

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
LONG_AGO = timedelta(days=365)


def _record(index: int, age: timedelta = timedelta()) -> RequestRecord:
    return RequestRecord(
        request_id=f"req-{index:05d}",
        started_at=(NOW - age).timestamp() + index / 1000,
        endpoint="/v1/chat/completions",
        status=200,
        latency_ms=5,
    )


def test_a_batch_is_written_with_its_trail_and_long_names_cut_to_their_columns() -> None:
    step = TrailStep(StepKind.SKIPPED, "p/m", 7, "circuit_open", detail="for 30s (self)")
    record = RequestRecord("abc", NOW.timestamp(), "/v1/messages", 503, 9, model="m" * 500)

    written = request_log_write(records=[record, _record(1)])

    assert written == 2
    entry = RequestLogEntry.objects.get(request_id="abc")
    assert entry.started_at == NOW
    assert len(entry.model) == 200
    assert entry.trail == []
    request_log_write(records=[RequestRecord("with-trail", 0.0, "/v1/x", 200, 1, trail=(step,))])
    assert RequestLogEntry.objects.get(request_id="with-trail").trail == [step.as_json()]


def test_every_field_of_a_record_lands_in_its_own_column() -> None:
    step = TrailStep(StepKind.TRIED, "p/m", 7, "success", 200, 12)
    record = RequestRecord(
        request_id="every-field",
        started_at=NOW.timestamp(),
        endpoint="/v1/responses",
        status=201,
        latency_ms=1001,
        key_name="team-a",
        key_prefix="sk-omr-ab",
        model="asked",
        provider="prov",
        target_model="served",
        connection_id=41,
        connection_name="conn",
        error_code="some_code",
        time_to_first_token_ms=1002,
        tokens_in=1003,
        tokens_out=1004,
        attempts=3,
        trail=(step,),
    )

    request_log_write(records=[record])

    entry = RequestLogEntry.objects.get(request_id="every-field")
    stored = {name: getattr(entry, name) for name in RECORDED}
    expected = {name: getattr(record, name) for name in RECORDED}
    expected.update(started_at=NOW, trail=[step.as_json()])
    assert stored == expected


def test_a_request_id_already_logged_is_skipped_not_an_error() -> None:
    request_log_write(records=[_record(1)])

    request_log_write(records=[_record(1), _record(2)])

    assert RequestLogEntry.objects.count() == 2


def test_pruning_deletes_the_rows_older_than_the_age() -> None:
    request_log_write(records=[_record(i, timedelta(days=10)) for i in range(5)])
    request_log_write(records=[_record(i, timedelta(hours=1)) for i in range(5, 8)])

    deleted = request_log_prune(now=NOW, max_age=timedelta(days=7), max_rows=1000)

    assert deleted == 5
    assert sorted(RequestLogEntry.objects.values_list("request_id", flat=True)) == [
        "req-00005",
        "req-00006",
        "req-00007",
    ]


def test_pruning_keeps_the_table_at_its_row_bound_newest_first() -> None:
    for start in range(0, 300, 100):  # three batches, as the writer sends them
        request_log_write(records=[_record(i) for i in range(start, start + 100)])

    request_log_prune(now=NOW, max_age=LONG_AGO, max_rows=120)

    assert RequestLogEntry.objects.count() == 120
    kept = set(RequestLogEntry.objects.values_list("request_id", flat=True))
    assert kept == {f"req-{i:05d}" for i in range(180, 300)}
    assert request_log_prune(now=NOW, max_age=LONG_AGO, max_rows=120) == 0


@pytest.mark.django_db(transaction=True)  # the writer's own thread, with its own connection
def test_the_writer_thread_keeps_its_connection_until_a_database_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[str] = []
    real_close = type(connections["default"]).close

    def counting_close(wrapper: BaseDatabaseWrapper) -> None:
        closed.append(threading.current_thread().name)
        real_close(wrapper)

    def failing(**_: object) -> int:
        raise DatabaseError("the database went away")

    def in_writer_thread() -> None:
        try:
            writer.write_rows([_record(1)])
            writer.write_rows([_record(2)])
            seen["after two batches"] = list(closed)
            monkeypatch.setattr(services, "request_log_write", failing)
            with pytest.raises(DatabaseError):
                writer.write_rows([_record(3)])
            seen["after an error"] = list(closed)
        finally:
            connection.close()

    seen: dict[str, list[str]] = {}
    monkeypatch.setattr(type(connections["default"]), "close", counting_close)
    thread = threading.Thread(target=in_writer_thread, name="request-log")
    thread.start()
    thread.join(timeout=30)

    assert seen == {"after two batches": [], "after an error": ["request-log"]}
    assert RequestLogEntry.objects.count() == 2
