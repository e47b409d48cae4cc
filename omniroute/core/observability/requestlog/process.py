"""The request log's writer process: the database work of the log, off the serving process.

A thread that inserts rows shares the serving process's interpreter lock with the event loop.
SQLite gives the lock up around every row it steps, and taking it back from a busy event loop
waits for the loop's switch interval: under load each row cost the process about five times
what it costs an idle one, and the log took a fifth of a plain request's CPU
(docs/operating.md, "Request log"). So each serving process starts one child process, on the
first batch, that owns the log's inserts and pruning; the writer thread
(:mod:`~omniroute.core.observability.requestlog.writer`) only hands it batches.

The protocol, over the child's stdin and stdout: the parent sends frames (a 4-byte length,
then a pickle of ``(kind, payload)``), one at a time, and reads one 4-byte status back for each
before it sends the next, so "written" means committed by the child. The child ignores SIGINT
and SIGTERM: a stop writes what is queued through it first, and the child leaves when its
stdin closes, which is also what a parent killed outright does. A child that cannot be started,
or is gone, has its batch written by the parent's thread instead, so a batch is never lost to
it; a request id already logged is skipped, so a batch the child committed before it died is
not logged twice.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import IO, Any

from omniroute.core.codepath import child_environ, python_module
from omniroute.core.observability.requestlog.record import (
    RequestRecord,
    StepKind,
    TrailStep,
)

__all__ = ["WriterGone", "WriterProcess", "packed", "unpacked"]

# Named, not ``__name__``: the child runs this module as ``__main__``.
logger = logging.getLogger("omniroute.core.observability.requestlog.process")

FRAME = struct.Struct(">I")  # a frame's length, before its pickle
STATUS = struct.Struct(">I")  # the child's answer to one frame
WRITE, PRUNE = "write", "prune"
DONE, FAILED = 0, 1
STOP_SECONDS = 5.0  # how long ``close`` waits for the child to finish and leave
# How long the parent waits for the answer to one frame: a child silent for longer is wedged
# (a batch takes milliseconds; the database's own lock wait is 5 s on SQLite). It is killed and
# its batch written by the parent, so the writer thread is never held for good.
ANSWER_SECONDS = 60.0
RESTART_PAUSE_SECONDS = 10.0  # after a child failed, the thread writes alone this long

Batch = Callable[[list[RequestRecord]], object]
Packed = tuple[Any, ...]

# Each dataclass's fields in their order, ``trail`` (the record's last) and ``kind`` (the step's
# first) apart: the two are packed by hand.
_RECORD = [field.name for field in fields(RequestRecord)]
_STEP = [field.name for field in fields(TrailStep)]
assert _RECORD[-1] == "trail" and _STEP[0] == "kind"
_record_fields = attrgetter(*_RECORD[:-1])
_STEP_KINDS = {kind.value: kind for kind in StepKind}  # a dict look-up, not the enum's call
_step_rest = attrgetter(*_STEP[1:])


class WriterGone(Exception):
    """The child could not be started, or left in the middle of a frame."""


def packed(record: RequestRecord) -> Packed:
    """``record`` as plain values: cheap to build and to pickle, where a slotted dataclass and
    an enum pickle through Python code of their own."""
    trail = tuple((step.kind.value, *_step_rest(step)) for step in record.trail)
    return (*_record_fields(record), trail)


def unpacked(values: Packed) -> RequestRecord:
    """The record :func:`packed` gave."""
    *fields, trail = values
    steps = tuple(TrailStep(_STEP_KINDS[kind], *rest) for kind, *rest in trail)
    return RequestRecord(*[*fields, steps])  # in _RECORD's order, as packed: the trail last


class WriterProcess:
    """The parent's handle on its writer process: ``write`` and ``prune`` each send one frame
    and wait for the child's answer. Used by the writer thread alone (one frame at a time)."""

    def __init__(
        self, *, fallback_write: Batch, fallback_prune: Callable[[], object], argv: list[str]
    ) -> None:
        self._argv = argv
        self._fallback_write, self._fallback_prune = fallback_write, fallback_prune
        self._child: subprocess.Popen[bytes] | None = None
        self._start_after = 0.0  # no child is started before this (monotonic seconds)

    @classmethod
    def for_this_interpreter(
        cls, *, fallback_write: Batch, fallback_prune: Callable[[], object]
    ) -> WriterProcess:
        """A writer process running this module with the interpreter that runs the gateway."""
        argv = python_module("omniroute.core.observability.requestlog.process")
        return cls(fallback_write=fallback_write, fallback_prune=fallback_prune, argv=argv)

    @property
    def pid(self) -> int | None:
        """The running child's process id, if one runs."""
        return self._child.pid if self._child is not None else None

    def write(self, records: list[RequestRecord]) -> None:
        """Have the child insert ``records`` (in this thread when it cannot)."""
        try:
            self._send(WRITE, [packed(record) for record in records])
        except WriterGone:
            self._fallback_write(records)

    def prune(self) -> None:
        """Have the child prune the table (in this thread when it cannot)."""
        try:
            self._send(PRUNE, None)
        except WriterGone:
            self._fallback_prune()

    def close(self) -> None:
        """Close the child's input and wait, bounded, for it to leave."""
        child, self._child = self._child, None
        if child is None:
            return
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _send(self, kind: str, payload: object) -> None:
        child = self._running()
        frame = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        assert child.stdin is not None and child.stdout is not None
        deadline = time.monotonic() + ANSWER_SECONDS
        try:
            _send_all(child.stdin.fileno(), FRAME.pack(len(frame)) + frame, deadline)
            answer = _answer(child.stdout.fileno(), deadline)
        except (OSError, ValueError) as exc:  # a broken pipe, a child silent past the bound
            self._gone(child)
            raise WriterGone(str(exc)) from exc
        if len(answer) < STATUS.size:
            self._gone(child)
            raise WriterGone(f"the writer process left with {child.poll()}")
        if STATUS.unpack(answer)[0] != DONE:  # the child logged why
            raise RuntimeError(f"the request log's writer process could not {kind}")

    def _running(self) -> subprocess.Popen[bytes]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        if self._child is not None:
            self._gone(self._child)
        if time.monotonic() < self._start_after:
            raise WriterGone("the writer process failed a moment ago")
        try:
            child = subprocess.Popen(  # noqa: S603: this interpreter and this module
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                env=child_environ(os.environ),
            )
        except OSError as exc:
            self._start_after = time.monotonic() + RESTART_PAUSE_SECONDS
            raise WriterGone(f"the writer process could not start: {exc}") from exc
        assert child.stdin is not None
        os.set_blocking(child.stdin.fileno(), False)  # written with a deadline: _send_all
        self._child = child
        return child

    def _gone(self, child: subprocess.Popen[bytes]) -> None:
        """A child that failed: let it go, and start no other for a while (one that cannot
        start would otherwise be started, and log its failure, at every batch)."""
        self._forget(child)
        self._start_after = time.monotonic() + RESTART_PAUSE_SECONDS
        logger.warning(
            "the request log's writer process is gone: the writer thread inserts the rows"
            " for %g s, then starts another",
            RESTART_PAUSE_SECONDS,
        )

    def _forget(self, child: subprocess.Popen[bytes]) -> None:
        """Let a child that failed go: its pipes closed, reaped, killed if it still runs."""
        if self._child is child:
            self._child = None
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        if child.poll() is None:
            child.kill()
        child.wait()


def _send_all(fd: int, data: bytes, deadline: float) -> None:
    """Write ``data`` to the non-blocking descriptor ``fd`` by ``deadline`` (an ``OSError``
    past it: a child that stopped reading must not hold the writer thread)."""
    view = memoryview(data)
    while view:
        _wait_for(fd, select.POLLOUT, deadline)
        view = view[os.write(fd, view) :]


def _answer(fd: int, deadline: float) -> bytes:
    """The child's answer to one frame, read from its stdout's descriptor (never through a
    buffer, so that waiting on it is exact) by ``deadline``; fewer bytes if it ended first."""
    data = b""
    while len(data) < STATUS.size:
        _wait_for(fd, select.POLLIN, deadline)
        chunk = os.read(fd, STATUS.size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _wait_for(fd: int, events: int, deadline: float) -> None:
    """Until ``fd`` is ready for ``events`` (or closed), by ``deadline``; ``poll``, which takes
    any descriptor, where ``select`` refuses one past 1 023."""
    poller = select.poll()
    poller.register(fd, events)
    if not poller.poll(max(0, math.ceil((deadline - time.monotonic()) * 1000))):
        raise OSError(f"the writer process did not answer within {ANSWER_SECONDS:g} s")


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    """``size`` bytes from ``stream``, or fewer if it ended first."""
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def serve(
    frames: IO[bytes], statuses: IO[bytes], write: Batch, prune: Callable[[], object]
) -> None:
    """The child's loop: each frame is written or pruned and answered, until ``frames`` ends."""
    while True:
        head = _read_exactly(frames, FRAME.size)
        if len(head) < FRAME.size:
            return  # the parent closed its end, or is gone
        kind, payload = pickle.loads(_read_exactly(frames, FRAME.unpack(head)[0]))
        status = DONE
        try:
            if kind == WRITE:
                write([unpacked(values) for values in payload])
            else:
                prune()
        except Exception:
            logger.exception("the request log could not %s", kind)
            status = FAILED
        statuses.write(STATUS.pack(status))
        statuses.flush()


def main() -> None:
    """The writer process: Django set up with the parent's settings (its environment) and the
    request log's app alone, then :func:`serve` on stdin; its own output goes to stderr, so
    that stdout carries answers only."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    statuses = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import django
    from django.conf import settings

    # The writer needs the request log's table and nothing else: with every app of the project
    # loaded it held 118 MB and took 1.1 s of CPU to start; with its own alone, 40 MB and 0.2 s.
    settings.INSTALLED_APPS = ["omniroute.core.observability.requestlog"]
    django.setup()
    from omniroute.core.observability.requestlog.writer import prune_rows, write_rows

    serve(sys.stdin.buffer, statuses, write_rows, prune_rows)


if __name__ == "__main__":
    main()
