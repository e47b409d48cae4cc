"""One chaos client request and the verdict on its answer.

The fake upstream's answers are deterministic text
(:func:`omniroute.tools.fakeupstream.wire.content`),
so a complete answer is checked exactly. Every request ends in one of: ``ok`` (the whole text,
one finish, one ``[DONE]`` on a stream); a clear error (an error status with an error code, or
a stream's in-band error event after a prefix of the text); or a violation: ``hang`` (no end
within the deadline and a grace), ``double answer`` (two finishes or ends, or anything after
the end), ``truncated as complete`` (an end without the whole text), ``truncated`` (a stream
that stops with neither end nor error), ``broken answer`` (a 200 whose body is not one JSON
document), ``wrong text`` (a stream error after text that is not the answer's start), ``500``,
``unclear error`` (no error code) or a transport failure.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import orjson

from omniroute.tools.chaos.faults import CHUNK_SIZE, CHUNKS
from omniroute.tools.fakeupstream.wire import content

EXPECTED: Final = content(CHUNKS * CHUNK_SIZE)
PROMPT: Final = [{"role": "user", "content": "Say hello"}]
GRACE_SECONDS: Final = 5.0
OK: Final = "ok"
VIOLATIONS: Final = frozenset(
    {
        "hang",
        "double answer",
        "truncated as complete",
        "truncated",
        "broken answer",
        "500",
        "unclear error",
        "transport error",
        "wrong text",
    }
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one request ended: ``OK``, a clear error (``"<status> <code>"`` or ``"stream
    <code>"``), or one of :data:`VIOLATIONS` (``detail`` says what was seen)."""

    outcome: str
    detail: str = ""

    @property
    def violation(self) -> bool:
        return self.outcome in VIOLATIONS


def _error_code(payload: Any) -> str | None:
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code") or error.get("type")
    return str(code) if code else None


def judge_json(status: int, body: bytes) -> Verdict:
    """A plain answer: 200 with exactly the text, or an error status with an error code."""
    shown = body[:300].decode("utf-8", "replace")
    if status == 500:
        return Verdict("500", shown)
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:  # a 200 cut short or doubled; an error without its JSON
        return Verdict("broken answer" if status == 200 else "unclear error", shown)
    if status != 200:
        code, message = _error_code(payload), str(payload.get("error", {}).get("message"))
        return Verdict(f"{status} {code}", message) if code else Verdict("unclear error", message)
    try:
        text = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return Verdict("unclear error", str(payload)[:200])
    return Verdict(OK) if text == EXPECTED else Verdict("truncated as complete", repr(text)[:200])


def _events(body: bytes) -> list[bytes]:
    """The ``data:`` payloads of an SSE body, in order (comments and other fields skipped)."""
    datas = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [ln[5:].lstrip() for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if lines:
            datas.append(b"\n".join(lines))
    return datas


def judge_stream(body: bytes) -> Verdict:
    """A 200 event stream: the text then one finish and one ``[DONE]``, or an in-band error
    event after a prefix of the text (then the end marker); nothing after the end."""
    text, finishes, errors, done, after_done = [], 0, [], 0, 0
    for data in _events(body):
        if done:
            after_done += 1
        if data == b"[DONE]":
            done += 1
            continue
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return Verdict("unclear error", f"not JSON: {data[:100]!r}")
        if (code := _error_code(payload)) is not None:
            errors.append(code)
            continue
        for choice in payload.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            text.append(piece or "")
            finishes += choice.get("finish_reason") is not None
    sent = "".join(text)
    if after_done or done > 1 or finishes > 1 or len(errors) > 1 or (errors and finishes):
        return Verdict("double answer", f"done={done} finishes={finishes} errors={errors}")
    if errors:
        if not EXPECTED.startswith(sent):
            return Verdict("wrong text", repr(sent)[:200])
        return Verdict(f"stream {errors[0]}")
    if not done and not finishes:
        return Verdict("truncated", f"{len(sent)} of {len(EXPECTED)} characters, no end")
    if sent != EXPECTED or not done or not finishes:
        detail = f"{len(sent)} of {len(EXPECTED)} characters, done={done} finishes={finishes}"
        return Verdict("truncated as complete", detail)
    return Verdict(OK)


async def send(
    session: aiohttp.ClientSession,
    url: str,
    key: str,
    model: str,
    *,
    stream: bool,
    deadline_ms: int,
) -> Verdict:
    """One request, bounded by its deadline (told to the gateway) plus :data:`GRACE_SECONDS`."""
    body = {"model": model, "messages": PROMPT, "stream": stream}
    headers = {"authorization": f"Bearer {key}", "x-omniroute-deadline-ms": str(deadline_ms)}
    try:
        async with asyncio.timeout(deadline_ms / 1000 + GRACE_SECONDS):
            async with session.post(url, json=body, headers=headers) as response:
                payload = await response.read()
                status, ctype = response.status, response.content_type
    except TimeoutError:
        return Verdict("hang", f"no end within {deadline_ms} ms + {GRACE_SECONDS} s")
    except aiohttp.ClientError as exc:
        return Verdict("transport error", f"{type(exc).__name__}: {exc}")
    if status == 200 and ctype == "text/event-stream":
        return judge_stream(payload)
    return judge_json(status, payload)
