"""The `lines` cursor: incoming messages numbered as the demo's scripted brain numbers
them, `when: {line: N}` and `{line}`; and the Anthropic `system` role the claude CLI sends."""

from __future__ import annotations

import pytest

from bandkit.llm import anthropic
from bandkit.llm.conversation import Conversation
from bandkit.llm.errors import ScriptError
from bandkit.llm.lines import LineCursor, sender_of
from bandkit.llm.script import ScriptSet

PEERS = ("Sam (Dev)", "Jordan (Architect)")


def msg(sender: str, text: str, *, system: str = "") -> str:
    prefix = f"[System]: {system}\n\n" if system else ""
    return f"{prefix}[New message -- act on this now:]\n[{sender}]: {text}"


def test_the_sender_is_the_last_tag() -> None:
    assert sender_of(msg("Sam (Dev)", "hi", system="[Jordan (Architect)]: joined")) == "Sam (Dev)"
    assert sender_of("no tag here") is None
    assert sender_of(None) is None


def test_peers_and_the_first_human_take_lines_later_humans_get_zero() -> None:
    cursor = LineCursor(PEERS)
    brief = msg("Presenter", "the brief")
    assert cursor.line_of(brief) == 1
    assert cursor.line_of(msg("Sam (Dev)", "one")) == 2
    assert cursor.line_of(msg("Presenter", "a nudge")) == 0
    assert cursor.line_of(msg("Sam (Dev)", "two")) == 3
    assert cursor.line_of(brief) == 1  # seen before: the same line (a retry, a tool result)


def test_a_peer_first_then_the_first_human_still_takes_a_line() -> None:
    cursor = LineCursor(PEERS)
    assert cursor.line_of(msg("Sam (Dev)", "one")) == 1
    assert cursor.line_of(msg("Conductor", "please rule")) == 2
    assert cursor.line_of(msg("Conductor", "again")) == 0


def conv(message: str, *, new_turn: bool = True) -> Conversation:
    return Conversation("m", False, ("band_send_message",), message, None, None, new_turn, 1)


def test_rules_keyed_on_the_line() -> None:
    scripts = ScriptSet.from_data(
        [
            {
                "agent": "pm",
                "lines": {"peers": list(PEERS)},
                "rules": [
                    {"when": {"line": 1}, "reply": {"text": "first ({line})"}},
                    {"when": {"line": 0}, "reply": {"text": "noted"}},
                ],
                "default": {"text": "line {line}"},
            }
        ]
    )
    script = scripts.agents["pm"]
    assert script.lines is not None
    cursor = LineCursor(script.lines.peers)
    decide = [
        script.decide(conv(m), turn=1, request=1, line=cursor.line_of(m))
        for m in (msg("H", "brief"), msg("H", "nudge"), msg("Sam (Dev)", "x"))
    ]
    assert [d.text for d in decide if d] == ["first (1)", "noted", "line 2"]


def test_a_line_rule_needs_the_lines_block() -> None:
    with pytest.raises(ScriptError, match="needs a top-level `lines`"):
        ScriptSet.from_data(
            [{"agent": "a", "rules": [{"when": {"line": 1}, "reply": {"text": "x"}}]}]
        )


def test_system_messages_between_turns_are_accepted_and_skipped() -> None:
    body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": msg("H", "brief")}]},
            {"role": "system", "content": "reminder"},
        ],
    }
    read = anthropic.conversation(body)
    assert read.message is not None
    assert read.message.endswith("brief")
    assert read.new_turn
