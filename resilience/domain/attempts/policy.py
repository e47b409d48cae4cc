"""The attempt policy: what the attempt loop does after a failed attempt (pure; see
docs/resilience.md, "Failure classification and attribution", for what each failure does).

After a failure the loop either **retries** the same target (after a wait), moves to the
**next** target, or **stops** and answers the client. In order:

* a failure the request caused and no other target can fix (content policy, invalid
  parameters): stop;
* an upstream ``Retry-After`` (or reset) within ``max_retry_after_wait_ms``: the next target
  at once when one serving the same model on another connection is left (an equivalent
  account answers now), else wait it out and retry the same target; a longer one: the next
  target;
* a stream that broke before its first token, with ``streamRecovery.enabled``: reopened once
  on the same target (the reference's same-account early recovery);
* a connect error, a reset or a timeout: retry once when no other target is left, else the
  next target at once (a silent target is not asked again while another may answer);
* a 5xx, a malformed reply or a 429 without a hint: up to ``retries_per_target`` retries with
  exponential backoff (``backoff_base_ms`` × 2^n, full jitter), then the next target;
* anything else another target may answer (context length, an account refusal): the next
  target, no retry.

Every wait must end inside the request's deadline; one that would not is skipped. The
deadline (``attempts.deadlineMs``, or the client's lower ``X-OmniRoute-Deadline-Ms``) bounds the
request until its answer begins; after a stream's first token only a deadline the client set
still ends it.

Two stream timeouts belong to the same section: ``time_to_first_token_ms`` bounds the wait for
a stream's first event, ``stream_idle_ms`` the silence between two chunks of a stream.

So does hedging a slow first token (``routing.proxy.hedging``): ``hedge_enabled`` turns it on or
off, ``hedge_after_ms`` is how long a stream waits for its first token before the next target
is started beside it (until the model has a learned first-token time; 0: never), and
``hedge_max_percent`` caps the share of a model's attempts in the last minute that are hedges.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DEFAULT_DEADLINE_MS = 300_000
DEFAULT_TIME_TO_FIRST_TOKEN_MS = 60_000
DEFAULT_STREAM_IDLE_MS = 60_000
DEFAULT_HEDGE_AFTER_MS = 10_000
DEFAULT_HEDGE_MAX_PERCENT = 10
DEADLINE_HEADER = "x-omniroute-deadline-ms"


@dataclass(frozen=True, slots=True)
class AttemptPolicy:
    """The ``attempts`` settings section, already in range."""

    retries_per_target: int = 1
    backoff_base_ms: int = 250
    max_retry_after_wait_ms: int = 5_000
    deadline_ms: int = DEFAULT_DEADLINE_MS
    time_to_first_token_ms: int = DEFAULT_TIME_TO_FIRST_TOKEN_MS
    stream_idle_ms: int = DEFAULT_STREAM_IDLE_MS
    hedge_enabled: bool = True
    hedge_after_ms: int = DEFAULT_HEDGE_AFTER_MS  # 0: never hedge
    hedge_max_percent: int = DEFAULT_HEDGE_MAX_PERCENT


class Step(StrEnum):
    RETRY = "retry"
    NEXT = "next"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Failure:
    """What the loop knows of one failed attempt."""

    fail_over: bool  # another target may answer (the attribution's verdict)
    transient: bool  # a transient failure of the pair (5xx, timeout, reset, 429 w/o hint)
    connection_level: bool = False  # a connect error, reset or timeout (no reply at all)
    reopen: bool = False  # a stream broke before its first token and may be reopened here
    hint_ms: int | None = None  # an upstream Retry-After / reset, in ms


@dataclass(frozen=True, slots=True)
class Decision:
    step: Step
    wait_seconds: float = 0.0


def decide(
    failure: Failure,
    policy: AttemptPolicy,
    *,
    retries_used: int,
    others_left: bool,
    remaining_seconds: float,
    jitter: float,
    same_model_left: bool = False,
) -> Decision:
    """The next move after ``failure`` (``jitter`` is a uniform draw in [0, 1));
    ``same_model_left``: a target serving the same model on another connection is left."""
    onward = Decision(Step.NEXT if failure.fail_over else Step.STOP)
    if not failure.fail_over:
        return onward
    retry_left = retries_used < policy.retries_per_target
    if failure.reopen and retry_left:  # ``streamRecovery.enabled``: the same target once more
        return Decision(Step.RETRY, 0.0)
    if failure.hint_ms is not None and failure.hint_ms > 0:
        wait = failure.hint_ms / 1000
        short = failure.hint_ms <= policy.max_retry_after_wait_ms
        if short and same_model_left:
            return onward
        if short and retry_left and wait < remaining_seconds:
            return Decision(Step.RETRY, wait)
        return onward
    if not failure.transient or not retry_left:
        return onward
    if failure.connection_level:
        return onward if others_left else Decision(Step.RETRY, 0.0)
    backoff = policy.backoff_base_ms / 1000 * (2**retries_used) * jitter
    if backoff >= remaining_seconds:
        return onward
    return Decision(Step.RETRY, backoff)


def deadline_ms(policy: AttemptPolicy, header: bytes | None) -> int:
    """The request's deadline until its answer begins: ``attempts.deadlineMs``, lowered (never
    raised) by the client's ``X-OmniRoute-Deadline-Ms``. ``ValueError`` for a header that is
    not a positive integer."""
    client = client_deadline_ms(header)
    return policy.deadline_ms if client is None else min(client, policy.deadline_ms)


def client_deadline_ms(header: bytes | None) -> int | None:
    """The deadline the client set (``X-OmniRoute-Deadline-Ms``), if it set one: once its
    answer began streaming, the only one left (a long healthy answer is never cut by the
    default). ``ValueError`` for a header that is not a positive integer."""
    if header is None:
        return None
    text = header.decode("latin-1").strip()
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"{DEADLINE_HEADER} must be a positive integer of milliseconds")
    return int(text)
