"""The request log's queue and background writer: batches, a bounded queue that drops and
counts, and pruning on its own clock (no database: the write and prune are injected)."""

from __future__ import annotations

import threading

from omniroute.core.observability.requestlog.record import RequestRecord
from omniroute.core.observability.requestlog.writer import DROPPED, RequestLogWriter

WAIT_SECONDS = 10


def _record(index: int) -> RequestRecord:
    return RequestRecord(f"req-{index}", 0.0, "/v1/chat/completions", 200, 1)


class Blocked:
    """A write that holds the writer thread until released, recording what it got."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[list[str]] = []

    def __call__(self, records: list[RequestRecord]) -> None:
        self.entered.set()
        assert self.release.wait(WAIT_SECONDS)
        self.batches.append([r.request_id for r in records])


def test_a_full_queue_drops_new_records_and_counts_them() -> None:
    # given: the writer is busy with one record and its queue of 3 is full
    write = Blocked()
    writer = RequestLogWriter(capacity=3, write=write, prune_every_seconds=3600)
    assert writer.submit(_record(0))
    assert write.entered.wait(WAIT_SECONDS)
    assert all(writer.submit(_record(i)) for i in (1, 2, 3))
    before = DROPPED._value.get()

    # when
    refused = [writer.submit(_record(i)) for i in (4, 5)]

    # then: the two are dropped and counted; everything queued is written, in order
    assert refused == [False, False]
    assert writer.dropped == 2
    assert DROPPED._value.get() == before + 2
    write.release.set()
    assert writer.wait_until_written(WAIT_SECONDS)
    assert [rid for batch in write.batches for rid in batch] == [f"req-{i}" for i in range(4)]
    assert writer.written == 4


def test_records_queued_behind_a_write_go_in_one_batch() -> None:
    write = Blocked()
    writer = RequestLogWriter(capacity=100, write=write, prune_every_seconds=3600, batch_size=10)
    writer.submit(_record(0))
    assert write.entered.wait(WAIT_SECONDS)
    for index in range(1, 26):
        writer.submit(_record(index))

    write.release.set()

    assert writer.wait_until_written(WAIT_SECONDS)
    assert [len(batch) for batch in write.batches] == [1, 10, 10, 5]
    assert writer.dropped == 0


def test_a_backlog_is_written_batch_after_batch_without_lingering() -> None:
    """Lingering after the first record of every batch capped the writer at one batch per
    linger (200 rows per 0.25 s: 800 a second), so a gateway answering more requests a second
    than that filled the queue and dropped records."""
    batches: list[int] = []
    writer = RequestLogWriter(
        capacity=2000,
        write=lambda records: batches.append(len(records)),
        prune_every_seconds=3600,
        batch_size=10,
        linger_seconds=0.5,  # 200 batches: 100 s if each lingered
    )
    for index in range(2000):
        assert writer.submit(_record(index))

    assert writer.wait_until_written(WAIT_SECONDS)
    assert sum(batches) == 2000 and writer.dropped == 0


def test_a_failed_write_is_dropped_and_the_writer_goes_on() -> None:
    written: list[str] = []

    def write(records: list[RequestRecord]) -> None:
        if records[0].request_id == "req-0":
            raise RuntimeError("database gone")
        written.extend(r.request_id for r in records)

    writer = RequestLogWriter(capacity=10, write=write, prune_every_seconds=3600)
    writer.submit(_record(0))
    assert writer.wait_until_written(WAIT_SECONDS)
    writer.submit(_record(1))

    assert writer.wait_until_written(WAIT_SECONDS)
    assert written == ["req-1"]


def test_pruning_runs_on_its_own_clock_without_any_request() -> None:
    pruned = threading.Semaphore(0)
    writer = RequestLogWriter(
        capacity=10, write=lambda records: None, prune=pruned.release, prune_every_seconds=0.05
    )
    writer.submit(_record(0))  # starts the thread; pruning then repeats with no more records

    assert all(pruned.acquire(timeout=WAIT_SECONDS) for _ in range(3))


def test_wait_until_written_is_bounded() -> None:
    write = Blocked()
    writer = RequestLogWriter(capacity=10, write=write, prune_every_seconds=3600)
    writer.submit(_record(0))
    assert write.entered.wait(WAIT_SECONDS)

    assert not writer.wait_until_written(0.05)
    write.release.set()
    assert writer.wait_until_written(WAIT_SECONDS)


def test_records_from_many_threads_are_each_written_once_in_their_order() -> None:
    """The queue takes no lock per record: appends from several threads while the writer takes
    batches lose no record, write none twice, and wake the writer whenever one waits."""
    written: list[str] = []
    writer = RequestLogWriter(
        capacity=100_000,
        write=lambda records: written.extend(r.request_id for r in records),
        prune_every_seconds=3600,
        batch_size=50,
        linger_seconds=0.0,
    )

    def submit_all(thread: int) -> None:
        for index in range(5000):
            assert writer.submit(_record(thread * 10_000 + index))

    threads = [threading.Thread(target=submit_all, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)

    assert writer.wait_until_written(WAIT_SECONDS)
    assert len(written) == len(set(written)) == 20_000 and writer.written == 20_000
    for n in range(4):  # each thread's records in the order it submitted them
        own = [int(rid[4:]) for rid in written if int(rid[4:]) // 10_000 == n]
        assert own == sorted(own)
