"""The request log's writer process: records cross the pipe whole, each frame is answered,
a failed batch is reported, a child that cannot serve has its batch written by the parent, and
the child leaves on its input's end, not on SIGTERM (docs/operating.md, "Request log")."""

from __future__ import annotations

import io
import os
import pickle
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omniroute.core.codepath import ROOT, child_environ, python_module
from omniroute.core.observability.requestlog import process
from omniroute.core.observability.requestlog.process import (
    DONE,
    FAILED,
    FRAME,
    PRUNE,
    STATUS,
    WRITE,
    WriterProcess,
    packed,
    serve,
    unpacked,
)
from omniroute.core.observability.requestlog.record import RequestRecord, StepKind, TrailStep

WAIT_SECONDS = 30


def _record(index: int) -> RequestRecord:
    trail = (
        TrailStep(StepKind.SKIPPED, "a/m", 1, "cooldown", detail="for 3s (cooldown)"),
        TrailStep(StepKind.TRIED, "b/m", 2, "success", 200, 12),
    )
    return RequestRecord(
        f"req-{index}",
        1_800_000_000.5,
        "/v1/chat/completions",
        200,
        15,
        key_name="team-\ud800",  # a lone surrogate crosses too: the row's own check refuses it
        model="gpt",
        connection_id=2,
        time_to_first_token_ms=None,
        tokens_in=3,
        attempts=1,
        trail=trail,
    )


def _frame(kind: str, payload: object) -> bytes:
    body = pickle.dumps((kind, payload))
    return FRAME.pack(len(body)) + body


def test_a_record_crosses_whole() -> None:
    record = _record(1)
    assert unpacked(pickle.loads(pickle.dumps(packed(record)))) == record
    assert unpacked(packed(RequestRecord("r", 0.0, "/v1/x", 499, 0))).trail == ()


def test_the_child_loop_answers_each_frame_and_goes_on_after_a_failure() -> None:
    written: list[list[str]] = []
    pruned: list[bool] = []

    def write(records: list[RequestRecord]) -> None:
        if records[0].request_id == "req-9":
            raise RuntimeError("the database is locked")
        written.append([record.request_id for record in records])

    frames = io.BytesIO(
        _frame(WRITE, [packed(_record(1)), packed(_record(2))])
        + _frame(WRITE, [packed(_record(9))])
        + _frame(PRUNE, None)
        + _frame(WRITE, [packed(_record(3))])
    )
    statuses = io.BytesIO()

    serve(frames, statuses, write, lambda: pruned.append(True))  # returns at the input's end

    answers = statuses.getvalue()
    assert [STATUS.unpack_from(answers, i)[0] for i in range(0, len(answers), 4)] == [
        DONE,
        FAILED,
        DONE,
        DONE,
    ]
    assert written == [["req-1", "req-2"], ["req-3"]]
    assert pruned == [True]


# A stand-in child: the real loop, with a write that appends request ids to a file (or fails).
CHILD = textwrap.dedent(
    """
    import sys
    from omniroute.core.observability.requestlog.process import serve

    out = sys.argv[1]

    def write(records):
        if any(r.request_id == "req-fail" for r in records):
            raise RuntimeError("refused")
        with open(out, "a") as f:
            f.writelines(r.request_id + "\\n" for r in records)

    serve(sys.stdin.buffer, sys.stdout.buffer, write, lambda: None)
    """
)


class Fallback:
    def __init__(self) -> None:
        self.written: list[str] = []
        self.pruned = 0

    def write(self, records: list[RequestRecord]) -> None:
        self.written += [record.request_id for record in records]

    def prune(self) -> None:
        self.pruned += 1


def _writer(argv: list[str], fallback: Fallback) -> WriterProcess:
    return WriterProcess(fallback_write=fallback.write, fallback_prune=fallback.prune, argv=argv)


def test_batches_are_written_by_the_child_and_a_failed_one_is_reported(tmp_path: Path) -> None:
    out, fallback = tmp_path / "rows", Fallback()
    writer = _writer([sys.executable, "-c", CHILD, str(out)], fallback)
    try:
        writer.write([_record(1), _record(2)])
        writer.write([_record(3)])
        with pytest.raises(RuntimeError, match="could not write"):
            writer.write([RequestRecord("req-fail", 0.0, "/v1/x", 200, 1)])
        writer.write([_record(4)])  # the same child goes on
        child = writer.pid
        writer.prune()
    finally:
        writer.close()

    assert out.read_text().split() == ["req-1", "req-2", "req-3", "req-4"]
    assert fallback.written == [] and fallback.pruned == 0
    assert child is not None and writer.pid is None


def test_a_child_that_is_gone_has_its_batch_written_by_the_parent(tmp_path: Path) -> None:
    # given: a child that leaves without answering, as one killed in the middle of a batch
    fallback = Fallback()
    writer = _writer([sys.executable, "-c", "import sys; sys.stdin.buffer.read(4)"], fallback)

    # when
    writer.write([_record(1)])
    writer.prune()

    # then: nothing is lost to it
    assert fallback.written == ["req-1"]
    assert fallback.pruned == 1
    writer.close()


def test_a_child_that_stops_answering_is_killed_and_its_batch_written_by_the_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given: a child that reads its frame and never answers (wedged), and a short bound
    monkeypatch.setattr(process, "ANSWER_SECONDS", 0.5)
    fallback = Fallback()
    wedged = "import sys, time; sys.stdin.buffer.read(8); time.sleep(600)"
    writer = _writer([sys.executable, "-c", wedged], fallback)

    # when
    writer.write([_record(1)])

    # then: the batch is not lost, and the wedged child is gone
    assert fallback.written == ["req-1"]
    assert writer.pid is None
    writer.close()


def test_a_child_that_stops_reading_does_not_hold_the_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given: a child that reads nothing, and a batch larger than a pipe's buffer (64 KiB)
    monkeypatch.setattr(process, "ANSWER_SECONDS", 0.5)
    fallback = Fallback()
    writer = _writer([sys.executable, "-c", "import time; time.sleep(600)"], fallback)
    batch = [_record(index) for index in range(2000)]

    # when
    writer.write(batch)

    # then
    assert len(fallback.written) == 2000
    assert writer.pid is None
    writer.close()


def test_a_child_that_fails_is_not_started_again_at_every_batch(tmp_path: Path) -> None:
    # given: a child that leaves at once, each start counted
    starts, fallback = tmp_path / "starts", Fallback()
    leaves = f"open({str(starts)!r}, 'a').write('started\\n')"
    writer = _writer([sys.executable, "-c", leaves], fallback)

    # when: three batches and a prune, well within the pause after a failure
    for index in range(3):
        writer.write([_record(index)])
    writer.prune()

    # then: one start; the thread wrote everything meanwhile
    assert starts.read_text().split() == ["started"]
    assert fallback.written == ["req-0", "req-1", "req-2"] and fallback.pruned == 1


def test_descriptors_past_1023_are_waited_on(tmp_path: Path) -> None:
    # given: the child's pipes get descriptors past what select() takes
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    out, fallback = tmp_path / "rows", Fallback()
    writer = _writer([sys.executable, "-c", CHILD, str(out)], fallback)
    try:
        # when
        writer.write([_record(1)])
        # then: the child wrote it
        assert writer.pid is not None
        assert out.read_text().split() == ["req-1"] and fallback.written == []
    finally:
        writer.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_child_that_cannot_start_has_its_batch_written_by_the_parent(tmp_path: Path) -> None:
    fallback = Fallback()
    writer = _writer([str(tmp_path / "no-such-program")], fallback)
    writer.write([_record(1)])
    assert fallback.written == ["req-1"]


def test_a_child_killed_between_batches_is_started_again(tmp_path: Path) -> None:
    out, fallback = tmp_path / "rows", Fallback()
    writer = _writer([sys.executable, "-c", CHILD, str(out)], fallback)
    try:
        writer.write([_record(1)])
        first = writer.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        writer.write([_record(2)])  # a broken pipe, then the fallback; or a new child
        writer.write([_record(3)])
    finally:
        writer.close()
    assert writer.pid is None
    got = out.read_text().split() + fallback.written
    assert sorted(got) == ["req-1", "req-2", "req-3"]


def test_the_real_child_ignores_sigterm_and_leaves_when_its_input_ends(tmp_path: Path) -> None:
    # given: the writer process itself, on a database without the log's table
    env = child_environ({**os.environ, "OMNIROUTE_DATA_DIR": str(tmp_path)})
    child = subprocess.Popen(
        python_module(process.__name__),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr").open("wb"),
        cwd=ROOT,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        # a prune's answer says the child is in its loop (it fails: there is no table)
        child.stdin.write(_frame(PRUNE, None))
        child.stdin.flush()
        assert STATUS.unpack(child.stdout.read(STATUS.size))[0] == FAILED

        # when: a stop signal, then the parent closes its end
        child.send_signal(signal.SIGTERM)
        child.stdin.write(_frame(PRUNE, None))
        child.stdin.flush()
        assert STATUS.unpack(child.stdout.read(STATUS.size))[0] == FAILED  # still serving
        child.stdin.close()

        # then: it leaves of its own accord, and its stdout carried answers only
        assert child.wait(WAIT_SECONDS) == 0
        assert child.stdout.read() == b""
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
