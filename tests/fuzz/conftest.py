"""Hypothesis profiles for the fuzz tests, and a count of the cases each target ran.

``ci`` (the default) is short and derandomised, so the normal run is repeatable and fast;
``long`` (``HYPOTHESIS_PROFILE=long``, ``make fuzz``) draws many more cases from a fresh seed.
Neither has a deadline: a loaded machine must not turn a slow example into a failure.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# The API fuzzer runs one Hypothesis test per operation: its examples per operation.
API_EXAMPLES = {"ci": 6, "long": 40}

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=2_000,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(PROFILE)

CASES: Counter[str] = Counter()

F = TypeVar("F", bound=Callable[..., Any])


def counted(test: F) -> F:
    """Count each case the wrapped property runs (put it under ``@given``)."""
    name = test.__name__.removeprefix("test_")

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        CASES[name] += 1
        return test(*args, **kwargs)

    return run  # type: ignore[return-value]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The cases per fuzz target, for BENCHMARKS.md."""
    if not CASES:
        return
    terminalreporter.section(f"fuzz cases (hypothesis profile {PROFILE!r})")
    for name, count in sorted(CASES.items()):
        terminalreporter.write_line(f"{count:>8}  {name}")
    terminalreporter.write_line(f"{sum(CASES.values()):>8}  total")
