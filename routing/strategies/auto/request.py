"""What a client asks of the ``auto`` strategy, and what its request weighs
(pure).

Three request headers steer one request of an ``auto`` combo:

* ``X-OmniRoute-Mode``: the router mode for this request only, overriding the combo's (one of
  :class:`AutoMode`, or an alias: ``eco`` = ``cost``, ``fast`` = ``latency``, ``sla-aware`` =
  ``sla``; case-insensitive);
* ``X-OmniRoute-Budget``: the most the client will pay for this request, in USD (a decimal
  number >= 0). A target whose estimated cost is above it drops out;
* ``X-OmniRoute-Budget-Fallback``: what happens when every target is above the budget:
  ``cheapest`` (the default) tries them anyway, cheapest first; ``strict`` refuses the request
  with a 402 ``budget_exceeded`` instead.

A malformed value is the client's mistake: :func:`parse_auto_headers` raises a 400 naming the
header, before any target is tried.

A request's estimated cost at a target is ``input tokens x input price + max output tokens x
output price`` (prices in USD per million tokens, from the model catalog). The input tokens
are estimated from the request body at about four characters a token; the output tokens are
the request's own cap (``max_tokens``, ``max_completion_tokens`` or ``max_output_tokens``), or
:data:`DEFAULT_OUTPUT_TOKENS` when it sets none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from routing.domain.client.errors import GatewayError

MODE_HEADER = "x-omniroute-mode"
BUDGET_HEADER = "x-omniroute-budget"
BUDGET_FALLBACK_HEADER = "x-omniroute-budget-fallback"
STRICT = "strict"
CHEAPEST = "cheapest"
CHARS_PER_TOKEN = 4  # the usual rough size of a token in English text and JSON
DEFAULT_OUTPUT_TOKENS = 4096  # the estimate for a request that does not cap its answer
OUTPUT_CAP_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
TOKENS_PER_PRICE_UNIT = 1_000_000  # catalog prices are per million tokens


class AutoMode(StrEnum):
    """The ``auto`` strategy's router modes (how ``routing.strategies.auto.scoring`` orders)."""

    RULES = "rules"  # the default: the weighted score, after the rules prelude
    SCORE = "score"  # the weighted score alone
    SMART = "smart"  # as rules, exploring twice as often (reference ``auto/smart``)
    COST = "cost"  # ascending estimated cost
    LATENCY = "latency"  # ascending p95 latency + error rate x 1000
    SLA = "sla"  # the targets meeting the latency and error SLA first
    LKGP = "lkgp"  # the last-known-good target first


MODE_ALIASES: dict[str, AutoMode] = {
    **{mode.value: mode for mode in AutoMode},
    "eco": AutoMode.COST,
    "fast": AutoMode.LATENCY,
    "sla-aware": AutoMode.SLA,
}


@dataclass(frozen=True, slots=True)
class Budget:
    """The client's spending cap for one request, and whether it is strict."""

    max_usd: float
    strict: bool = False


@dataclass(frozen=True, slots=True)
class AutoOptions:
    """What the request's headers ask of ``auto`` (``None``: not asked)."""

    mode: AutoMode | None = None
    budget: Budget | None = None


@dataclass(frozen=True, slots=True)
class RequestProfile:
    """What the scoring needs of the request itself."""

    input_tokens: int = 0
    max_output_tokens: int | None = None
    tools: int = 0

    @property
    def output_tokens(self) -> int:
        """The output tokens a cost estimate assumes."""
        return self.max_output_tokens or DEFAULT_OUTPUT_TOKENS

    @property
    def needed_tokens(self) -> int:
        """The context window the request needs: its input and its answer."""
        return self.input_tokens + self.output_tokens


def _invalid(code: str, header: str, message: str) -> GatewayError:
    return GatewayError(400, code, f"Invalid {header} header: {message}")


def parse_mode(value: str) -> AutoMode:
    """The router mode a header value names, or a 400 ``invalid_auto_mode``."""
    mode = MODE_ALIASES.get(value.strip().lower())
    if mode is None:
        known = ", ".join(sorted(MODE_ALIASES))
        raise _invalid("invalid_auto_mode", "X-OmniRoute-Mode", f"{value!r} is not one of {known}.")
    return mode


def parse_budget(value: str) -> float:
    """A budget header's USD amount, or a 400 ``invalid_budget``."""
    try:
        amount = float(value.strip())
    except ValueError:
        amount = math.nan
    if not math.isfinite(amount) or amount < 0:
        message = f"{value!r} is not an amount in USD (a number >= 0, e.g. 0.05)."
        raise _invalid("invalid_budget", "X-OmniRoute-Budget", message)
    return amount


def parse_budget_fallback(value: str) -> bool:
    """Whether a budget-fallback header value is ``strict``, or a 400."""
    given = value.strip().lower()
    if given not in (STRICT, CHEAPEST):
        message = f"{value!r} is not '{STRICT}' or '{CHEAPEST}'."
        raise _invalid("invalid_budget_fallback", "X-OmniRoute-Budget-Fallback", message)
    return given == STRICT


def parse_auto_headers(headers: Mapping[str, str]) -> AutoOptions:
    """The ``auto`` options of a request's headers (names case-insensitive); raises a 400
    ``GatewayError`` on a malformed value. The fallback header alone changes nothing."""
    lowered = {name.lower(): value for name, value in headers.items()}
    mode = lowered.get(MODE_HEADER)
    budget = lowered.get(BUDGET_HEADER)
    fallback = lowered.get(BUDGET_FALLBACK_HEADER)
    strict = parse_budget_fallback(fallback) if fallback is not None else False
    return AutoOptions(
        mode=parse_mode(mode) if mode is not None else None,
        budget=Budget(parse_budget(budget), strict) if budget is not None else None,
    )


def _output_cap(payload: Mapping[str, Any]) -> int | None:
    for name in OUTPUT_CAP_FIELDS:
        value = payload.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def estimate_input_tokens(payload: Mapping[str, Any]) -> int:
    """The request's input tokens, estimated from its JSON size (about four characters a
    token, rounded up); the output cap fields and ``model`` are not input."""
    if not payload:
        return 0
    body = {k: v for k, v in payload.items() if k != "model" and k not in OUTPUT_CAP_FIELDS}
    size = len(orjson.dumps(body, default=str))
    return -(-size // CHARS_PER_TOKEN)


def request_profile(payload: Mapping[str, Any], tools: int = 0) -> RequestProfile:
    """What the scoring needs of a request: its estimated input, its output cap and how many
    tools it declares."""
    return RequestProfile(estimate_input_tokens(payload), _output_cap(payload), tools)


def estimate_cost(
    request: RequestProfile, input_price: float | None, output_price: float | None
) -> float | None:
    """The request's estimated cost in USD at a model with these prices per million tokens;
    ``None`` when the input price is unknown. A missing output price counts as the input
    price (a catalog entry with one price means one price for both)."""
    if input_price is None or not math.isfinite(input_price):
        return None
    if output_price is None or not math.isfinite(output_price):
        output_price = input_price
    tokens_cost = request.input_tokens * input_price + request.output_tokens * output_price
    return tokens_cost / TOKENS_PER_PRICE_UNIT


def budget_exceeded(budget: Budget, cheapest_usd: float | None) -> GatewayError:
    """402 ``budget_exceeded``: the client asked for a strict budget that no target fits."""
    cheapest = f"${cheapest_usd:.6f}" if cheapest_usd is not None else "unknown"
    message = (
        f"Every target of this combo is estimated above the request's budget of "
        f"${budget.max_usd:.6f} (the cheapest: {cheapest}), and X-OmniRoute-Budget-Fallback "
        "is 'strict'. Raise the budget, or drop the strict fallback to try the cheapest."
    )
    diagnostics = {"budgetUsd": budget.max_usd, "cheapestUsd": cheapest_usd}
    return GatewayError(402, "budget_exceeded", message, extra={"diagnostics": diagnostics})
