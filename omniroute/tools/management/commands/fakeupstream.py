"""`manage.py fakeupstream`: serve the fake upstream (`omniroute.tools.fakeupstream`) until
interrupted."""

from __future__ import annotations

import asyncio
import logging
import signal
from argparse import ArgumentParser
from collections.abc import Coroutine
from typing import Any

from django.core.management.base import BaseCommand

from omniroute.tools.fakeupstream import Behaviour, FakeUpstream

logger = logging.getLogger(__name__)


def _run(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


class Command(BaseCommand):
    help = "Run a fake OpenAI-compatible upstream (see omniroute.tools.fakeupstream for the knobs)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8100)
        parser.add_argument("--chunks", type=int, help="stream chunks per answer (default 20)")
        parser.add_argument("--chunk-interval-ms", type=float, help="delay between chunks")
        parser.add_argument("--latency-ms", type=float, help="delay before response headers")
        parser.add_argument("--no-record", action="store_true", help="keep no request log")
        parser.add_argument(
            "--seed", type=int, help="seed of the error_rate draws (repeatable runs)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        knobs = {k: options[k] for k in ("chunks", "chunk_interval_ms", "latency_ms")}
        defaults = Behaviour().with_knobs({k: v for k, v in knobs.items() if v is not None})
        fake = FakeUpstream(
            host=options["host"],
            port=options["port"],
            defaults=defaults,
            record=not options["no_record"],
            seed=options["seed"],
        )
        try:
            _run(self._serve(fake))
        except (KeyboardInterrupt, asyncio.CancelledError):
            logger.info("fake upstream stopped")

    async def _serve(self, fake: FakeUpstream) -> None:
        task = asyncio.current_task()
        if task is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        url = await fake.listen()
        self.stdout.write(f"fake upstream listening on {url}")
        self.stdout.flush()
        logger.info("fake upstream serving %s (access log disabled)", url)
        await fake.serve_forever()
