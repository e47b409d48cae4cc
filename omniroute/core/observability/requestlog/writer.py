"""The request log's queue and its background writer.

``submit`` is all the request path pays: one non-blocking put on a bounded queue. One daemon
thread per process takes what is queued in batches of up to :data:`BATCH_SIZE` (letting a
batch gather for :data:`LINGER_SECONDS` after its first record, unless a full batch is waiting
already: a backlog is written batch after batch, never at one batch per linger), has each
batch written in one insert, and the table pruned by age and count every
``REQUEST_LOG_PRUNE_SECONDS`` (never per request): by the writer process
(:mod:`~omniroute.core.observability.requestlog.process`, ``REQUEST_LOG_PROCESS``), else
itself. When the database falls behind and the queue
is full, a new record is dropped and counted (``dropped``, and the
``omniroute_request_log_dropped_total`` counter on ``/metrics``): the request never waits for
its log line. A graceful stop waits up to :data:`FLUSH_SECONDS` for what is queued to be written
(``request_log_flush``, called by the gateway's stop). docs/operating.md, "Request log".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from prometheus_client import Counter

from omniroute.core.observability.requestlog.process import WriterProcess
from omniroute.core.observability.requestlog.record import RequestRecord

__all__ = [
    "BATCH_SIZE",
    "FLUSH_SECONDS",
    "RequestLogWriter",
    "request_log_flush",
    "request_log_writer",
    "submit",
]

logger = logging.getLogger(__name__)

BATCH_SIZE = 200  # rows per insert: one statement, short enough not to hold SQLite's lock long
# After the first record of a batch, the writer lets more gather before it writes: under load
# one wake-up and one insert serve many requests instead of one each.
LINGER_SECONDS = 0.25
# How long a stopping process waits for its queued records: a full queue of batches written to a
# healthy database takes well under this; a database that is down does not hold the stop long.
FLUSH_SECONDS = 5.0
DROPPED = Counter(
    "omniroute_request_log_dropped",
    "Request-log records dropped because the request log's queue was full.",
)
WRITTEN = Counter(
    "omniroute_request_log_written",
    "Request-log records handed to the database (a batch that fails is logged, not retried).",
)

Write = Callable[[list[RequestRecord]], object]


def _nothing() -> None:
    """No pruning."""


class RequestLogWriter:
    """A bounded queue of records and the thread that writes them in batches and prunes.

    The queue is a ``deque``: the request path appends without taking a lock (the interpreter
    makes one append atomic), and wakes the thread only when the queue was found idle, once per
    batch. A ``queue.Queue`` took two locks and signalled a condition for every record, put and
    get, and the thread and the event loop contended for them at every request
    (docs/operating.md, "Request log")."""

    def __init__(
        self,
        *,
        capacity: int,
        write: Write,
        prune: Callable[[], object] = _nothing,
        prune_every_seconds: float = 60.0,
        batch_size: int = BATCH_SIZE,
        linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self._queue: deque[RequestRecord] = deque()
        self._capacity = capacity
        self._write, self._prune = write, prune
        self._prune_every = prune_every_seconds
        self._batch_size, self._linger = batch_size, linger_seconds
        self._wake = threading.Event()  # set when a record arrives while the thread is idle
        self._busy = False  # the thread holds records taken from the queue and not yet written
        self._written_cond = threading.Condition()  # notified after every batch
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self.dropped = 0  # records refused because the queue was full
        self.written = 0  # records handed to ``write``

    def submit(self, record: RequestRecord) -> bool:
        """Queue ``record`` without waiting; ``False`` (and counted) when the queue is full."""
        queue = self._queue
        if len(queue) >= self._capacity:
            self.dropped += 1
            DROPPED.inc()
            return False
        queue.append(record)
        if not self._wake.is_set():
            self._wake.set()
            if self._thread is None:
                self._start()
        return True

    def wait_until_written(self, timeout: float) -> bool:
        """Whether everything queued so far was written within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._written_cond:
            while self._queue or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._written_cond.wait(remaining)
        return True

    def _start(self) -> None:
        with self._starting:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="request-log", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        next_prune = time.monotonic()
        while True:
            if not self._queue:
                self._wake.wait(timeout=max(0.0, next_prune - time.monotonic()))
            self._wake.clear()  # a record that arrives from now on sets it again
            if self._queue:
                if len(self._queue) < self._batch_size:  # less than a batch: let it gather
                    time.sleep(self._linger)  # the writer's own thread: no request waits on it
                self._write_batch()
            if time.monotonic() >= next_prune:
                self._safely(self._prune)
                next_prune = time.monotonic() + self._prune_every

    def _write_batch(self) -> None:
        self._busy = True  # before the first record leaves the queue: a flush waits for it
        queue = self._queue
        batch = [queue.popleft() for _ in range(min(len(queue), self._batch_size))]
        try:
            self._safely(lambda: self._write(batch))
            self.written += len(batch)
            WRITTEN.inc(len(batch))
        finally:
            with self._written_cond:
                self._busy = False
                self._written_cond.notify_all()

    @staticmethod
    def _safely(work: Callable[[], object]) -> None:
        try:
            work()
        except Exception:  # the log is best effort: a failed batch is logged and dropped
            logger.exception("the request log could not write or prune")


_writer: RequestLogWriter | None = None
_building = threading.Lock()


def write_rows(records: list[RequestRecord]) -> None:
    from omniroute.core.observability.requestlog.services import request_log_write

    with _reconnecting_on_error():
        request_log_write(records=records)


def prune_rows() -> None:
    from django.utils import timezone

    from omniroute.core.observability.requestlog.services import request_log_prune

    max_age = timedelta(days=settings.REQUEST_LOG_MAX_AGE_DAYS)
    with _reconnecting_on_error():
        request_log_prune(
            now=timezone.now(), max_age=max_age, max_rows=settings.REQUEST_LOG_MAX_ROWS
        )


@contextmanager
def _reconnecting_on_error() -> Iterator[None]:
    """The writer thread keeps its database connection from batch to batch (opening one per
    batch cost it as much as the insert); a database error closes it, so the next batch
    starts on a fresh one."""
    from django.db import DatabaseError, connection

    try:
        yield
    except DatabaseError:
        connection.close()
        raise


def request_log_writer() -> RequestLogWriter | None:
    """This process's writer, built from the settings at first use; ``None`` when the request
    log is turned off (``OMNIROUTE_REQUEST_LOG=0``)."""
    global _writer
    if _writer is None and settings.REQUEST_LOG_ENABLED:
        with _building:
            if _writer is None:
                write: Write = write_rows
                prune: Callable[[], object] = prune_rows
                if settings.REQUEST_LOG_PROCESS:
                    child = WriterProcess.for_this_interpreter(
                        fallback_write=write_rows, fallback_prune=prune_rows
                    )
                    write, prune = child.write, child.prune
                _writer = RequestLogWriter(
                    capacity=settings.REQUEST_LOG_QUEUE_SIZE,
                    write=write,
                    prune=prune,
                    prune_every_seconds=settings.REQUEST_LOG_PRUNE_SECONDS,
                )
    return _writer


def submit(record: RequestRecord) -> None:
    """Log one finished request, off the request's path (nothing when the log is off)."""
    writer = request_log_writer()
    if writer is not None:
        writer.submit(record)


def request_log_flush(timeout: float = FLUSH_SECONDS) -> bool:
    """Wait, at most ``timeout`` seconds, until every record queued so far is written (the
    gateway's stop calls it, so that a graceful stop loses no record); whether they all were.
    Nothing to wait for when this process logged no request."""
    writer = _writer
    return True if writer is None else writer.wait_until_written(timeout)
