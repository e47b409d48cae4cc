"""The proxy's clock, pauses and jitter, in one place so that tests run the attempt policy's
waits and the request's deadline on a fake clock (they replace these attributes)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

now: Callable[[], float] = time.monotonic
pause: Callable[[float], Awaitable[None]] = asyncio.sleep
jitter: Callable[[], float] = random.random
