"""Upstream behaviours and setup for the fusion and pipeline consumer tests: members that
answer a draft with their own text and the judge with the judged one, members that hang
until cancelled, and a combo whose steps are three connections of one provider."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from routing.models import Combo, Provider
from routing.services import combo_save
from tests.routing.harness import Behaviour, add_connection, unread

SOURCE_MARK = "--- Source 1 ---"
JUDGED = "The judged answer."
KEYS = ("sk-acme-A-0001", "sk-acme-B-0002", "sk-acme-C-0003")
MODELS = ("alpha", "beta", "gamma")

Plain = Callable[[str], dict[str, Any]]
"""A plain answer of one client API with the given text."""


def completion(text: str) -> dict[str, Any]:
    """A Chat Completions answer."""
    message = {"role": "assistant", "content": text}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def body_of(request: httpx.Request) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(request.content)
    return parsed


def turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's turns: ``messages``, or a Responses ``input`` list."""
    given = body.get("messages", body.get("input"))
    return list(given) if isinstance(given, list) else []


def last_turn(request: httpx.Request) -> str:
    found = turns(body_of(request))
    content = found[-1].get("content") if found else None
    return content if isinstance(content, str) else ""


def is_judge(request: httpx.Request) -> bool:
    return SOURCE_MARK in last_turn(request)


def replying(plain: Plain, text: str, judged: Behaviour | None = None) -> Behaviour:
    """Answer a draft with ``text``; the judge with ``judged`` (else :data:`JUDGED`)."""

    async def behaviour(request: httpx.Request) -> httpx.Response:
        if is_judge(request):
            if judged is not None:
                return await judged(request)
            return unread(200, orjson.dumps(plain(JUDGED)))
        return unread(200, orjson.dumps(plain(text)))

    return behaviour


@dataclass
class Hanging:
    """A member that never answers: it records that it was asked and that it was cancelled."""

    asked: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.cancelled.set()
        raise AssertionError("unreachable")


def judge_requests(requests: Sequence[httpx.Request]) -> list[httpx.Request]:
    return [r for r in requests if is_judge(r)]


def drafts(requests: Sequence[httpx.Request]) -> list[httpx.Request]:
    return [r for r in requests if not is_judge(r)]


def sources_in(prompt: str) -> list[str]:
    """The answers a judge prompt carries, by source number."""
    return re.findall(r"--- Source \d+ ---\n(.*?)(?=\n\n---)", prompt, re.DOTALL)


def three_step_combo(
    provider: Provider, strategy: str, keys: Sequence[str] = KEYS, models: Sequence[str] = MODELS
) -> list[int]:
    """Three connections of ``provider``, one combo step each (``models`` in order), in combo
    ``team``; their ids."""
    ids = [
        add_connection(provider, f"conn-{n}", key, priority=10 * n)
        for n, key in enumerate(keys, start=1)
    ]
    targets = [
        {"provider": provider, "model": model, "connection_id": cid}
        for cid, model in zip(ids, models, strict=True)
    ]
    combo_save(combo=Combo(), fields={"name": "team", "strategy": strategy}, targets=targets)
    return ids
