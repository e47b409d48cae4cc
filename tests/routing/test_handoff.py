"""The context-relay handoff, pure."""

from __future__ import annotations

import pytest

from routing.strategies import handoff


@pytest.mark.parametrize(
    ("used", "expected"),
    [(None, False), (0.5, False), (0.85, True), (0.9, True), (0.95, False), (1.0, False)],
)
def test_a_summary_is_prepared_inside_the_band(used, expected):
    assert handoff.should_prepare(used, 0.85) is expected


def test_conversation_keeps_the_newest_thirty_turns():
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(40)]
    turns = handoff.conversation({"messages": messages})
    assert len(turns) == 30
    assert turns[0] == ("user", "turn 10") and turns[-1] == ("user", "turn 39")


def test_conversation_fits_the_history_budget_keeping_the_newest():
    big = "a" * 20_000
    turns = handoff.conversation(
        {
            "messages": [
                {"role": "user", "content": big},
                {"role": "assistant", "content": big},
                {"role": "user", "content": "last"},
            ]
        }
    )
    assert sum(len(text) for _, text in turns) <= handoff.MAX_HISTORY_TOKENS * 4
    assert turns[-1] == ("user", "last")


def test_conversation_reads_messages_and_responses_payloads():
    messages = handoff.conversation(
        {
            "system": "rules",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}],
        }
    )
    assert messages == [("system", "rules"), ("user", "q")]
    responses = handoff.conversation({"instructions": "be kind", "input": "hello"})
    assert responses == [("system", "be kind"), ("user", "hello")]


def test_the_summary_request_is_small_and_cold():
    request = handoff.summary_request([("user", "q"), ("assistant", "a")], "m1")
    assert request["model"] == "m1" and request["stream"] is False
    assert request["max_tokens"] == 800 and request["temperature"] == 0.1
    content = request["messages"][0]["content"]
    assert "[user]\nq" in content and "[assistant]\na" in content


def test_summary_text_of_both_wire_formats():
    chat = {"choices": [{"message": {"role": "assistant", "content": " the gist "}}]}
    assert handoff.summary_text(chat, "openai") == "the gist"
    anthropic = {"content": [{"type": "text", "text": "part 1, "}, {"type": "text", "text": "2"}]}
    assert handoff.summary_text(anthropic, "anthropic") == "part 1, 2"
    assert handoff.summary_text({"choices": []}, "openai") is None


def test_with_handoff_puts_the_summary_first_for_each_api():
    block = "<context_handoff>\nS\n</context_handoff>"
    chat = handoff.with_handoff(
        {"messages": [{"role": "user", "content": "q"}]}, "S", "chat.completions"
    )
    assert chat["messages"][0] == {"role": "system", "content": block}
    assert chat["messages"][1]["content"] == "q"
    messages = handoff.with_handoff({"system": "rules", "messages": []}, "S", "messages")
    assert messages["system"] == f"{block}\n\nrules"
    blocks = handoff.with_handoff({"system": [{"type": "text", "text": "r"}]}, "S", "messages")
    assert blocks["system"][0] == {"type": "text", "text": block}
    responses = handoff.with_handoff({"input": "q"}, "S", "responses")
    assert responses["instructions"] == block


def test_with_handoff_leaves_the_payload_unchanged():
    payload = {"messages": [{"role": "user", "content": "q"}]}
    handoff.with_handoff(payload, "S", "chat.completions")
    assert payload == {"messages": [{"role": "user", "content": "q"}]}
