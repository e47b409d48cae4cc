"""A graceful stop loses no request-log record: the gateway's stop waits for the writer to
write what the finished requests queued (``omniroute.shutdown``; docs/operating.md, "Request
log")."""

from __future__ import annotations

import pytest
from django.db import connection

from omniroute import lifespan
from omniroute.core.observability.requestlog import writer
from omniroute.core.observability.requestlog.models import RequestLogEntry
from omniroute.core.observability.requestlog.record import RequestRecord
from omniroute.core.observability.requestlog.services import request_log_write

pytestmark = pytest.mark.django_db(transaction=True)  # the writer's thread has its own connection

QUEUED = 25


def _write(records: list[RequestRecord]) -> None:
    try:
        request_log_write(records=records)
    finally:
        connection.close()  # the thread outlives the test: it keeps no connection open


@pytest.fixture
def process_writer(monkeypatch: pytest.MonkeyPatch) -> writer.RequestLogWriter:
    """This process's writer, writing to the test database."""
    own = writer.RequestLogWriter(capacity=100, write=_write, prune_every_seconds=3600)
    monkeypatch.setattr(writer, "_writer", own)
    return own


async def test_the_stop_writes_every_queued_record_before_it_returns(
    process_writer: writer.RequestLogWriter,
) -> None:
    # given: requests finished just before the stop, their records still queued
    for index in range(QUEUED):
        assert process_writer.submit(RequestRecord(f"req-{index}", 0.0, "/v1/x", 200, 1))

    # when: the gateway's stop runs (after its last request)
    await lifespan.stop_cleanly()

    # then: every record is a row already
    count = await RequestLogEntry.objects.acount()
    assert count == QUEUED


def test_a_process_that_logged_nothing_has_nothing_to_wait_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer, "_writer", None)
    assert writer.request_log_flush(timeout=0)
