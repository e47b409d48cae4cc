"""The attempt policy's decision after a failed attempt (pure)."""

from __future__ import annotations

import pytest

from resilience.domain.attempts.policy import (
    AttemptPolicy,
    Decision,
    Failure,
    Step,
    client_deadline_ms,
    deadline_ms,
    decide,
)

POLICY = AttemptPolicy(retries_per_target=1, backoff_base_ms=250, max_retry_after_wait_ms=5_000)


def after(
    failure: Failure,
    *,
    used: int = 0,
    others: bool = True,
    left: float = 300.0,
    jitter: float = 0.5,
) -> Decision:
    return decide(
        failure,
        POLICY,
        retries_used=used,
        others_left=others,
        remaining_seconds=left,
        jitter=jitter,
    )


SERVER_ERROR = Failure(fail_over=True, transient=True)
NETWORK = Failure(fail_over=True, transient=True, connection_level=True)


def test_a_request_scoped_failure_stops() -> None:
    assert after(Failure(fail_over=False, transient=False)).step is Step.STOP


def test_a_non_transient_failure_another_target_may_answer_moves_on() -> None:
    assert after(Failure(fail_over=True, transient=False)).step is Step.NEXT


def test_a_server_error_is_retried_with_jittered_exponential_backoff() -> None:
    assert after(SERVER_ERROR, jitter=0.5) == Decision(Step.RETRY, 0.125)
    two = AttemptPolicy(retries_per_target=2, backoff_base_ms=250)
    second = decide(
        SERVER_ERROR, two, retries_used=1, others_left=True, remaining_seconds=300, jitter=0.5
    )
    assert second == Decision(Step.RETRY, 0.25)
    assert after(SERVER_ERROR, used=1).step is Step.NEXT  # retries spent


def test_a_connection_level_failure_moves_on_while_another_target_is_left() -> None:
    assert after(NETWORK, others=True).step is Step.NEXT
    assert after(NETWORK, others=False) == Decision(Step.RETRY, 0.0)


@pytest.mark.parametrize(("hint_ms", "step"), [(2_000, Step.RETRY), (5_001, Step.NEXT)])
def test_a_retry_after_within_the_bound_is_waited_out(hint_ms: int, step: Step) -> None:
    decision = after(Failure(fail_over=True, transient=False, hint_ms=hint_ms))
    assert decision.step is step
    if step is Step.RETRY:
        assert decision.wait_seconds == 2.0


def test_no_wait_may_outlast_the_deadline() -> None:
    hinted = Failure(fail_over=True, transient=False, hint_ms=2_000)
    assert after(hinted, left=1.5).step is Step.NEXT
    assert after(SERVER_ERROR, left=0.1, jitter=0.9).step is Step.NEXT


def test_the_client_may_lower_the_deadline_but_not_raise_it() -> None:
    policy = AttemptPolicy(deadline_ms=300_000)
    assert deadline_ms(policy, None) == 300_000
    assert deadline_ms(policy, b"10000") == 10_000
    assert deadline_ms(policy, b"900000") == 300_000
    for bad in (b"", b"abc", b"0", b"-1", b"1.5"):
        with pytest.raises(ValueError, match="positive integer"):
            deadline_ms(policy, bad)


def test_the_deadline_the_client_set_is_its_own_whatever_the_default() -> None:
    # after commit only this one bounds a stream: a header above the default is kept as it is
    assert client_deadline_ms(None) is None
    assert client_deadline_ms(b" 900000 ") == 900_000
    with pytest.raises(ValueError, match="positive integer"):
        client_deadline_ms(b"0")


def test_a_stream_broken_before_its_first_token_is_reopened_once_when_enabled() -> None:
    reopen = Failure(fail_over=True, transient=True, connection_level=True, reopen=True)
    assert after(reopen, others=True) == Decision(Step.RETRY, 0.0)  # even with others left
    assert after(reopen, others=True, used=1).step is Step.NEXT  # once
    assert after(NETWORK, others=True).step is Step.NEXT  # without it: the next target
