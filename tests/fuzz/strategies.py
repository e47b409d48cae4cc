"""Shared Hypothesis strategies: upstream headers and error bodies, clocks, zones, targets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

from routing.domain.config.snapshot import ConnectionInfo, ProviderInfo
from routing.domain.config.vocabulary import WireFormat
from routing.domain.plan.planning import Target

# Epoch seconds from 1970 to 2100: every clock the gateway can plausibly run on.
NOW = st.floats(min_value=0.0, max_value=4_102_444_800.0, allow_nan=False)
ZONES: tuple[tzinfo, ...] = (
    UTC,
    ZoneInfo("Europe/Paris"),
    ZoneInfo("America/New_York"),
    ZoneInfo("Australia/Lord_Howe"),  # a 30-minute DST shift
    ZoneInfo("Pacific/Kiritimati"),  # UTC+14
)
TZ = st.sampled_from(ZONES)

_HINT_HEADERS = ("retry-after", "Retry-After", "x-ratelimit-reset", "X-RateLimit-Reset")
_INSTANTS = st.datetimes(
    min_value=datetime(1, 1, 2),  # noqa: DTZ001 - naive bounds; the zone comes from timezones=
    max_value=datetime(9999, 12, 30),  # noqa: DTZ001
    timezones=st.one_of(st.none(), st.sampled_from(ZONES)),
)
_NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
)
_HEADER_VALUE = st.one_of(
    _NUMBER_TEXT,
    _INSTANTS.map(lambda d: d.isoformat()),
    _INSTANTS.map(lambda d: d.strftime("%a, %d %b %Y %H:%M:%S GMT")),
    st.text(max_size=40),
)
HEADERS = st.dictionaries(
    st.one_of(st.sampled_from(_HINT_HEADERS), st.text(max_size=20)),
    _HEADER_VALUE,
    max_size=4,
)

_JSON_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    _HEADER_VALUE,
    st.sampled_from(["33s", "1.5s", "1500ms", "2m", "1h", "0s", "-5s", "9" * 400 + "s"]),
    st.sampled_from([1e306, -1e306, 1.7976931348623157e308, 10**400, -(10**400)]),
)
_FIELDS = (
    "resets_at",
    "resetsAt",
    "retryAfter",
    "retry_after",
    "retry_after_ms",
    "retryAfterMs",
    "code",
    "message",
)
_RETRY_INFO = st.fixed_dictionaries(
    {"@type": st.just("type.googleapis.com/google.rpc.RetryInfo"), "retryDelay": _JSON_SCALAR}
)
_ERROR_OBJECT = st.dictionaries(
    st.sampled_from(_FIELDS),
    _JSON_SCALAR,
    max_size=4,
).flatmap(
    lambda fields: st.one_of(
        st.just(fields),
        st.lists(st.one_of(_RETRY_INFO, _JSON_SCALAR), max_size=3).map(
            lambda details: {**fields, "details": details}
        ),
    )
)
JSON_BODIES = st.one_of(
    _ERROR_OBJECT.map(lambda error: json.dumps({"error": error})),
    _ERROR_OBJECT.map(json.dumps),
    st.recursive(_JSON_SCALAR, lambda inner: st.lists(inner, max_size=3), max_leaves=8).map(
        json.dumps
    ),
)
_PHRASES = (
    "please retry in {n}s",
    "Please retry in {n}ms",
    "try again at {iso}",
    "wait until {iso}",
    "Your limit resets at {iso}.",
    "available at {iso}",
    "retry after {iso}",
    "will reset after {h}h{m}m{s}s",
    "resets in {h}h {m}m",
    "quota resets in {n} days",
    "You exceeded your current quota, please check your plan and billing details.",
    "Rate limit reached for requests per day (RPD). Limit resets at midnight.",
)
_NUMBER = st.one_of(
    st.integers(min_value=0, max_value=10**20).map(str),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(lambda f: f"{f:.3f}"),
    st.just("9" * 400),
)
PROSE = st.builds(
    lambda template, n, h, m, s, instant, noise: (
        noise[0] + template.format(n=n, h=h, m=m, s=s, iso=instant.isoformat()) + noise[1]
    ),
    st.sampled_from(_PHRASES),
    _NUMBER,
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=10**6),
    _INSTANTS,
    st.tuples(st.text(max_size=10), st.text(max_size=10)),
)
BODIES = st.one_of(JSON_BODIES, PROSE, st.text(max_size=200))


# -- targets ----------------------------------------------------------------------------------

_PROVIDERS = {
    slug: ProviderInfo(slug, slug.title(), "api_key", f"https://{slug}.test/v1", WireFormat.OPENAI)
    for slug in ("alpha", "beta", "gamma")
}


def _target(connection_id: int, slug: str, model: str, step: int) -> Target:
    connection = ConnectionInfo(
        id=connection_id,
        provider=slug,
        name=f"{slug}-{connection_id}",
        priority=connection_id,
        base_url=f"https://{slug}.test/v1",
        auth_type="api_key",
        secret=f"secret-{connection_id}",
    )
    return Target(_PROVIDERS[slug], connection, model, step)


def targets(max_size: int = 8) -> st.SearchStrategy[tuple[Target, ...]]:
    """Distinct targets (distinct (connection, model) pairs), as one request's plan lists them;
    a connection may serve two models, as a combo with per-model steps can."""
    pairs = st.lists(
        st.tuples(st.integers(min_value=1, max_value=12), st.sampled_from(["m1", "m2"])),
        unique=True,
        max_size=max_size,
    )
    return pairs.map(
        lambda found: tuple(
            _target(cid, sorted(_PROVIDERS)[cid % 3], model, step)
            for step, (cid, model) in enumerate(found)
        )
    )


def finite_or_odd_floats() -> st.SearchStrategy[float | None]:
    """Weights, prices and scores as callers may pass them: None, NaN, ±inf and negatives too."""
    return st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


def epoch_offsets(now: float) -> st.SearchStrategy[float | None]:
    """A reset instant near ``now`` (past or future), or unknown."""
    span = timedelta(days=40).total_seconds()
    return st.one_of(st.none(), st.floats(min_value=now - span, max_value=now + span))


def any_json() -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (what a parsed client body or stored record may hold)."""
    return st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**63), max_value=2**64 - 1),  # what JSON parsers give
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
