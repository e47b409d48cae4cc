"""``manage.py benchpair --base PATH``: gateway CPU per request of two checkouts, paired.

Single bench runs on a shared machine swing by tens of percent from one minute to the next, so
a before/after comparison runs both gateways side by side (each with its own fake upstream,
each started from its own checkout and ``.venv``) and alternates short bounded load runs
between them, the order changing every round. By default a third gateway from the after
checkout runs in the same rounds: its difference from the after gateway is the A/A noise
printed beside each cell (``--aa halves`` uses the spread between each side's first and second
half of rounds instead). A bar tighter than that noise is reported, not enforced.
``--base-serve`` gives the before side's ``serve`` options of its own (``--server uvicorn``,
``--workers 2``: one checkout against itself served another way), and a ratios table sets
before over after; ``--shared-state`` runs every gateway side on a fresh PostgreSQL database and
Redis key prefix of its own (what several workers need; the one-worker sides get the same, so
the comparison isolates the worker count), removed at the end. With
``--ceiling`` this checkout's bare proxy (``omniroute.tools.bench.bare``, with a fake upstream of
its own) runs in the same rounds, and a last table sets the after gateway against it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shlex
import signal
import textwrap
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from omniroute.tools.bench.paired import Plan, alternate, commit_of, is_checkout, started_sides
from omniroute.tools.bench.pairing import Cell, Sides, render, serve_workers
from omniroute.tools.bench.shared_state import SharedServers

BEFORE, AFTER, TWIN, BARE = "before", "after", "after-twin", "bare-proxy"
MODES = {"non-stream": False, "stream": True}
# The workers' bar: on two cores, two workers' gateway CPU per request at most 1.1× one worker's.
WORKERS_CPU_RATIO_LIMIT = 1.1
LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"


def _cells(modes: str, levels: str) -> tuple[Cell, ...]:
    try:
        streams = [MODES[m] for m in modes.split(",") if m]
        concurrencies = [int(c) for c in levels.split(",") if c]
    except (KeyError, ValueError) as error:
        raise CommandError(f"bad --modes or --concurrency: {error}") from error
    return tuple((s, c) for s in streams for c in concurrencies)


def _checkout(text: str) -> Path:
    path = Path(text).expanduser().resolve()
    if not is_checkout(path):
        raise CommandError(f"{path} has no manage.py and .venv/bin/python (run make install)")
    return path


def _variables(pairs: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` arguments as a mapping; a malformed one is a command error."""
    variables = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise CommandError(f"--base-env takes NAME=VALUE, not {pair!r}")
        variables[name] = value
    return variables


def serve_options(text: str, *, shared_state: bool) -> list[str]:
    """``--base-serve``'s text as ``serve`` arguments; several workers need ``--shared-state``
    (``serve`` refuses SQLite and the memory store for them)."""
    try:
        options = shlex.split(text)
    except ValueError as error:
        raise CommandError(f"bad --base-serve {text!r}: {error}") from error
    if serve_workers(options) > 1 and not shared_state:
        raise CommandError(
            "--base-serve with --workers above 1 needs --shared-state (PostgreSQL and Redis)"
        )
    return options


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C, so the started processes are stopped on the way out."""
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Gateway CPU per request of another checkout (--base) against this one, paired."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base", required=True, help="The before checkout (own .venv).")
        parser.add_argument("--after", help="The after checkout (default: this one).")
        parser.add_argument("--rounds", type=int, default=10, help="Rounds per cell.")
        parser.add_argument("--duration", type=float, default=3.0, help="Seconds per run.")
        parser.add_argument("--max-requests", type=int, default=20000, help="Cap per run.")
        parser.add_argument("--modes", default="non-stream,stream")
        parser.add_argument("--concurrency", default="1,16")
        parser.add_argument("--aa", choices=("twin", "halves"), default="twin")
        parser.add_argument("--bar", type=float, default=3.0, help="The bar, in percent.")
        parser.add_argument("--chunks", type=int, default=20)
        parser.add_argument("--chunk-interval-ms", type=int, default=1)
        parser.add_argument("--output", help="Also write the report to this Markdown file.")
        parser.add_argument(
            "--base-env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="Start the before side with this variable too (repeatable): one checkout against"
            " itself with a setting changed, e.g. --base . --base-env OMNIROUTE_REQUEST_LOG=0.",
        )
        parser.add_argument(
            "--base-serve",
            default="",
            metavar="OPTIONS",
            help="Serve the before side with these `serve` options, e.g. --base . --base-serve"
            " '--server uvicorn' or '--workers 2' (with --shared-state).",
        )
        parser.add_argument(
            "--shared-state",
            action="store_true",
            help="Run every gateway side on a fresh PostgreSQL database and Redis key prefix"
            " of its own (dropped and deleted at the end).",
        )
        parser.add_argument("--postgres", default=LOCAL_POSTGRES, help="With --shared-state.")
        parser.add_argument("--redis", default=LOCAL_REDIS, help="With --shared-state.")
        parser.add_argument(
            "--ceiling", action="store_true", help="Also run the bare proxy in the same rounds."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        base = _checkout(options["base"])
        after = _checkout(options["after"] or str(settings.BASE_DIR))
        plan = Plan(
            options["duration"],
            options["max_requests"],
            _cells(options["modes"], options["concurrency"]),
            max(2, options["rounds"]),
            options["chunks"],
            options["chunk_interval_ms"],
        )
        base_env = _variables(options["base_env"])
        base_serve = serve_options(options["base_serve"], shared_state=options["shared_state"])
        shared = (
            SharedServers(options["postgres"], options["redis"])
            if options["shared_state"]
            else None
        )
        checkouts = {BEFORE: base, AFTER: after}
        if options["aa"] == "twin":
            checkouts[TWIN] = after
        bare = BARE if options["ceiling"] else None
        sides = self._sides(checkouts, base_env, bare, base_serve)
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        started = dt.datetime.now(dt.UTC)
        try:
            with started_sides(
                checkouts,
                plan,
                {BEFORE: base_env},
                bare=bare,
                serve_options={BEFORE: base_serve},
                shared=shared,
            ) as running:
                runs = asyncio.run(alternate(running, plan, self.stderr.write))
        except KeyboardInterrupt:
            raise CommandError("interrupted: every process it started was stopped") from None
        intro = self._intro(plan, sides, started, shared)
        report = intro + "\n\n" + render(runs, sides, options["bar"])
        self.stdout.write(report)
        if options["output"]:
            Path(options["output"]).write_text(report)

    def _sides(
        self,
        checkouts: dict[str, Path],
        base_env: dict[str, str],
        bare: str | None,
        base_serve: list[str],
    ) -> Sides:
        labels = {name: f"{name} ({commit_of(path)})" for name, path in checkouts.items()}
        changed = [f"{k}={v}" for k, v in base_env.items()]
        if base_serve:
            changed.append(f"serve {shlex.join(base_serve)}")
        if changed:
            labels[BEFORE] = f"{BEFORE} ({commit_of(checkouts[BEFORE])}, {', '.join(changed)})"
        if TWIN in labels:
            labels[TWIN] = f"after′, A/A twin ({commit_of(checkouts[TWIN])})"
        if bare is not None:
            labels[bare] = f"bare proxy ({commit_of(Path(settings.BASE_DIR))})"
        limit = WORKERS_CPU_RATIO_LIMIT if serve_workers(base_serve) > 1 else None
        twin = TWIN if TWIN in checkouts else None
        return Sides(BEFORE, AFTER, twin, labels, bare, bool(base_serve), limit)

    def _intro(
        self, plan: Plan, sides: Sides, started: dt.datetime, shared: SharedServers | None
    ) -> str:
        noise = (
            "the change between the after gateway and a second gateway from the same checkout"
            " (its A/A twin) run in the same rounds"
            if sides.twin
            else "the larger spread between the medians of the first and second half of each"
            " side's rounds"
        )
        storage = (
            "each side on a fresh PostgreSQL database and Redis key prefix of its own, on the"
            " same servers"
            if shared is not None
            else "embedded default, SQLite and the memory store"
        )
        text = (
            f"`manage.py benchpair` started {started:%Y-%m-%d %H:%M} UTC: before is"
            f" {sides.labels[sides.before]}, after is {sides.labels[sides.after]}. Each side runs"
            " its own fake upstream and a gateway (`serve`: one daphne worker unless its label"
            f" says otherwise; {storage}, debug off) from its own checkout and .venv; load runs of"
            f" {plan.duration:g} s (at most {plan.max_requests} requests, each after a short"
            " warm-up) on the demo's `mock/demo-model` route"
            " alternate between the sides while the others idle, the order changing every"
            f" round, {plan.rounds} rounds per cell; {plan.chunks} chunks every"
            f" {plan.chunk_interval_ms} ms when streaming. Figures are gateway CPU per answered"
            " request (ms, from /proc, summed over every process of the gateway: with several"
            f" workers the supervisor and each worker) and medians; the A/A noise is {noise},"
            f" unsigned. The machine has {os.cpu_count()} CPUs, shared."
        )
        if sides.bare is not None:
            text += (
                " The ceiling side, in the same rounds, is this checkout's bare proxy (a"
                " Channels consumer on the gateway's daphne entry relaying streams through the"
                " same SSE splitter) before a fake upstream of its own; its CPU is the bare"
                " proxy's."
            )
        return textwrap.fill(text, 96)
