"""The chaos run's pure parts: its seeded fault schedule, its success bound, and the verdicts
that decide whether an answer was complete, a clear error or a violation."""

from __future__ import annotations

import random
from collections import Counter

import orjson
import pytest

from omniroute.tools.chaos import faults
from omniroute.tools.chaos.client import EXPECTED, OK, judge_json, judge_stream
from omniroute.tools.fakeupstream.wire import DONE, Answer, completion_body, stream_events

FULL = Answer(faults.CHUNKS * faults.CHUNK_SIZE)


def _stream(*, content: int | None = None, tail: bool = True, done: bool = True) -> bytes:
    """A stream as the fake writes it: ``content`` events (all by default), then its tail."""
    events = stream_events("m", FULL, faults.CHUNK_SIZE, False)
    parts = list(events.content[:content]) + (list(events.tail) if tail else [])
    return b"".join(parts) + (DONE if done else b"")


def _error_event(code: str) -> bytes:
    payload = {"error": {"message": "upstream broke", "type": "upstream_error", "code": code}}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def test_the_schedule_is_a_function_of_the_seed() -> None:
    assert faults.schedule(7, 500) == faults.schedule(7, 500)
    assert faults.digest(faults.schedule(7, 500)) != faults.digest(faults.schedule(8, 500))


def test_the_schedule_injects_each_fault_at_its_share() -> None:
    calls = 40_000
    drawn = Counter(name for name, _ in faults.schedule(3, calls))
    for fault in faults.FAULTS:  # 5 standard deviations of a binomial count
        spread = 5 * (calls * fault.share * (1 - fault.share)) ** 0.5
        assert abs(drawn[fault.name] - calls * fault.share) < spread, fault.name
    assert sum(drawn[f.name] for f in faults.FAULTS) / calls == pytest.approx(
        faults.FAULT_RATE, abs=0.01
    )


def test_a_mid_answer_fault_comes_after_some_content_and_before_the_end() -> None:
    rng = random.Random(5)
    mids = [f for f in faults.FAULTS if f.mid_answer]
    assert mids
    for fault in mids:
        for _ in range(200):
            assert 1 <= fault.knobs(rng)["mid_at"] < faults.CHUNKS


def test_the_success_bound() -> None:
    p, q = faults.FAULT_RATE, faults.MID_RATE
    assert faults.success_bound(1, stream=False) == pytest.approx(1 - p)
    assert faults.success_bound(3, stream=False) == pytest.approx(1 - p**3)
    # One target, streaming: the first call either succeeds or fails, before or mid-answer.
    assert faults.success_bound(1, stream=True) == pytest.approx(1 - p)
    assert faults.success_bound(2, stream=True) < faults.success_bound(2, stream=False)
    assert faults.success_bound(2, stream=True) > faults.success_bound(1, stream=True)
    assert faults.success_bound(2, stream=True) == pytest.approx(
        (1 - p) / (1 - p + q) * (1 - (p - q) ** 2)
    )


def test_a_complete_stream_passes_and_every_broken_one_is_caught() -> None:
    assert judge_stream(_stream()).outcome == OK
    assert judge_stream(b": keep-alive\n\n" + _stream()).outcome == OK
    cut = _stream(content=5, tail=False, done=False)
    assert judge_stream(cut).outcome == "truncated"
    assert judge_stream(_stream(content=5)).outcome == "truncated as complete"
    assert judge_stream(_stream(done=False)).outcome == "truncated as complete"
    assert judge_stream(_stream() + DONE).outcome == "double answer"
    assert judge_stream(_stream() + _error_event("late")).outcome == "double answer"
    events = stream_events("m", FULL, faults.CHUNK_SIZE, False)
    twice = b"".join(events.content) + events.tail[0] + events.tail[0] + DONE
    assert judge_stream(twice).outcome == "double answer"


def test_an_in_band_error_after_part_of_the_text_is_a_clear_error() -> None:
    broken = _stream(content=5, tail=False, done=False) + _error_event("upstream_timeout") + DONE
    assert judge_stream(broken).outcome == "stream upstream_timeout"
    other = Answer(FULL.n_chars, text="alt")
    alt = stream_events("m", other, faults.CHUNK_SIZE, False).content[:5]
    spliced = b"".join(alt) + _error_event("upstream_timeout") + DONE
    assert judge_stream(spliced).outcome == "wrong text"


def test_a_plain_answer_must_carry_the_whole_text() -> None:
    assert judge_json(200, completion_body("m", FULL)).outcome == OK
    short = Answer(FULL.n_chars - 8)
    assert judge_json(200, completion_body("m", short)).outcome == "truncated as complete"
    assert judge_json(200, completion_body("m", FULL)[:40]).outcome == "broken answer"
    assert judge_json(200, completion_body("m", FULL) * 2).outcome == "broken answer"
    error = orjson.dumps({"error": {"message": "x", "type": "t", "code": "upstream_timeout"}})
    assert judge_json(504, error).outcome == "504 upstream_timeout"
    assert judge_json(500, error).outcome == "500"
    assert judge_json(500, b"Internal Server Error").outcome == "500"
    assert judge_json(502, b"<html>bad gateway</html>").outcome == "unclear error"
    assert EXPECTED == FULL.content
