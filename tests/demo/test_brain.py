"""The scripted brain: which line answers which message, the script file, and the adapter
playing lines through band-sdk's own FakeAgentTools (peers tool, add, mentions)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from band.core.types import PlatformMessage
from band.testing.fake_tools import FakeAgentTools

from examples.docker_demo import brain
from examples.docker_demo.brain import BrainScriptError, Cursor, Line, Script, build_adapter
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.scenario import agent_script, load

ARCH = CAST[Role.ARCHITECT].name
DEV = CAST[Role.DEV].name


def script(*says: str, after: str = "silent", repeat_from: int = 0, human: str = "") -> Script:
    return Script(
        role="pm",
        name="Maya (PM)",
        turns=tuple(Line(say) for say in says),
        after=after,
        repeat_from=repeat_from,
        on_human=Line(human) if human else None,
    )


def said(cursor: Cursor, *sources: str) -> list[str | None]:
    out = []
    for source in sources:
        line = cursor.next_line(from_human=source == "human")
        out.append(None if line is None else line.say)
    return out


def test_the_brief_takes_the_first_turn_and_later_humans_get_on_human() -> None:
    cursor = Cursor(script("a", "b", human="h"))
    assert said(cursor, "human", "peer", "human", "peer") == ["a", "b", "h", None]


def test_a_peer_may_open_the_script_too() -> None:
    cursor = Cursor(script("a", "b"))
    assert said(cursor, "peer", "human", "human") == ["a", "b", None]


def test_a_human_after_the_last_turn_gets_on_human() -> None:
    # The architect rules on a peer's mention; the presenter's question on the open floor
    # is the first human message he gets, and there is no turn left for it.
    cursor = Cursor(script("verdict", human="it stands"))
    assert said(cursor, "peer", "human", "peer", "human") == [
        "verdict",
        "it stands",
        None,
        "it stands",
    ]


def test_silent_after_the_last_turn() -> None:
    assert said(Cursor(script("a")), "peer", "peer", "peer") == ["a", None, None]


def test_repeat_starts_again_at_repeat_from() -> None:
    cursor = Cursor(script("a", "b", "c", after="repeat", repeat_from=1))
    assert said(cursor, *["peer"] * 6) == ["a", "b", "c", "b", "c", "b"]


def test_an_empty_script_never_answers() -> None:
    assert said(Cursor(script(after="repeat")), "human", "peer") == [None, None]


def test_line_text_starts_with_its_mentions() -> None:
    assert Line("hi", mention=("Sam (Dev)", ARCH)).text() == f"@Sam (Dev) @{ARCH} hi"
    assert Line("hi").text() == "hi"


def test_script_round_trips_the_staged_json(tmp_path: Path) -> None:
    staged = agent_script(load("happy"), Role.PM, topic="the topic")
    path = tmp_path / brain.SCRIPT_FILE
    path.write_text(json.dumps(staged))
    loaded = Script.load(path)
    assert (loaded.role, loaded.name) == ("pm", "Maya (PM)")
    handoff = loaded.turns[2]
    assert (handoff.look_up, handoff.add, handoff.mention) == ((ARCH,), (ARCH,), (ARCH,))
    assert "the topic" in loaded.turns[0].say
    assert loaded.on_human is not None


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "demo stages one"),
        ("{not json", "cannot read"),
        ('{"schema": 2, "after": "silent"}', "not a schema 1 script"),
        ('{"schema": 1, "after": "loop", "role": "pm", "name": "x", "turns": []}', "schema 1"),
        ('{"schema": 1, "after": "silent", "role": "pm", "name": "x"}', "turns"),
    ],
)
def test_a_bad_script_is_one_clear_error(
    tmp_path: Path, content: str | None, fragment: str
) -> None:
    path = tmp_path / brain.SCRIPT_FILE
    if content is not None:
        path.write_text(content)
    with pytest.raises(BrainScriptError, match=fragment):
        Script.load(path)


def message(sender_type: str, sender: str = "someone") -> PlatformMessage:
    return PlatformMessage(
        id="m1",
        room_id="room-fake",
        content="hello",
        sender_id=sender,
        sender_type=sender_type,
        sender_name=sender,
        message_type="text",
        metadata=None,
        created_at=datetime.now(UTC),
    )


def peer(name: str, agent_id: str) -> dict[str, object]:
    return {
        "id": agent_id,
        "name": name,
        "handle": name.split()[0].lower(),
        "type": "Agent",
        "is_contact": False,
        "online": True,
        "source": "registry",
    }


def member_of_room(name: str, agent_id: str) -> dict[str, object]:
    return {
        "id": agent_id,
        "name": name,
        "handle": name.split()[0].lower(),
        "type": "Agent",
        "role": "member",
        "status": "active",
    }


async def test_the_adapter_looks_up_adds_and_mentions_through_the_tools() -> None:
    handoff = Line("Your call?", mention=(ARCH,), look_up=(ARCH,), add=(ARCH,))
    adapter = build_adapter(Script("pm", "Maya (PM)", (Line("Sam?", mention=(DEV,)), handoff)))
    tools = FakeAgentTools(
        participants=[member_of_room(DEV, "dev-1")],
        peers=[peer("Someone Else", "x-1"), peer(ARCH, "arch-1")],
    )
    for sender_type in ("User", "Agent"):
        await adapter.on_message(
            message(sender_type),
            tools,
            None,
            None,
            None,
            is_session_bootstrap=False,
            room_id="room-fake",
        )
    first, second = tools.messages_sent
    assert first["content"] == f"@{DEV} Sam?"
    assert second["content"] == f"@{ARCH} Your call?"
    assert [p["id"] for p in tools.participants_added] == ["arch-1"]
    await adapter.on_message(
        message("Agent"), tools, None, None, None, is_session_bootstrap=False, room_id="room-fake"
    )
    assert len(tools.messages_sent) == 2  # out of turns: no reply, no failure posted
    assert tools.turn is not None


async def test_each_room_has_its_own_cursor() -> None:
    seen: list[tuple[str, str]] = []

    async def record(line: Line, tools: object) -> None:
        seen.append((getattr(tools, "room_id", ""), line.say))

    adapter = build_adapter(script("a", "b"), player=record)
    for room in ("r1", "r2", "r1"):
        await adapter.on_message(
            message("Agent"),
            FakeAgentTools(room_id=room),
            None,
            None,
            None,
            is_session_bootstrap=False,
            room_id=room,
        )
    assert seen == [("r1", "a"), ("r2", "a"), ("r1", "b")]


async def test_a_line_for_the_room_goes_to_its_humans_and_wakes_no_agent() -> None:
    presenter = {
        "id": "user-1",
        "name": "Presenter",
        "handle": "presenter",
        "type": "User",
        "role": "owner",
        "status": "active",
    }
    tools = FakeAgentTools(participants=[presenter, member_of_room(DEV, "dev-1")])
    adapter = build_adapter(script("Thanks, everyone."))
    await adapter.on_message(
        message("Agent"), tools, None, None, None, is_session_bootstrap=False, room_id="room-fake"
    )
    (sent,) = tools.messages_sent
    assert sent["content"] == "Thanks, everyone."
    assert sent["mentions"] == ["user-1"]
    alone = FakeAgentTools(participants=[member_of_room(DEV, "dev-1")])
    await build_adapter(script("Thanks.")).on_message(
        message("Agent"), alone, None, None, None, is_session_bootstrap=False, room_id="room-fake"
    )
    assert alone.messages_sent == []
