"""Every push payload the emulator builds passes the SDK's own wire validator.

`band_sdk_core.validate_event_payload` is what the real client runs on each push; a
payload it rejects is dropped with only an ERROR log, so this pins the contract.
"""

from __future__ import annotations

import pytest
from band_sdk_core import validate_event_payload

from bandkit.emulator import messages, ops, wire
from bandkit.emulator.server import new_state
from bandkit.emulator.state import DeliveryStatus, Role

NOW = "2026-11-30T12:00:00.000000Z"


def _all_pushes() -> list[ops.Push]:
    state = new_state()
    agent, _ = ops.register_agent(state, "Echo Bot", "echoes", NOW)
    room, created = ops.create_room(state, "t", None, NOW)
    _, added = ops.add_participant(state, room.id, agent.id, Role.MEMBER, NOW)
    message, _, posted = messages.post_message(
        state, room, state.user.id, "hi", [{"id": agent.id}], NOW
    )
    _, claimed = messages.mark_processing(state, room, message.id, agent.id, NOW)
    _, settled = messages.settle(state, room, message.id, agent.id, DeliveryStatus.PROCESSED, NOW)
    _, event = messages.post_event(state, room, agent.id, "hmm", "thought", {"step": 1}, NOW)
    _, removed = ops.remove_participant(state, room.id, agent.id, NOW)
    deleted = ops.delete_room(state, room.id)
    owned, by_agent = ops.create_room(state, None, "task", NOW, owner_agent=agent.id)
    _, user_in = ops.add_participant(state, owned.id, state.user.id, Role.MEMBER, NOW)
    _, user_out = ops.remove_participant(state, owned.id, state.user.id, NOW)
    control = [
        ops.Push("agent_control:a", "supersede", wire.supersede()),
        ops.Push("agent_control:a", "agent.control", wire.agent_control("stop", agent.id, None)),
        ops.Push("agent_control:a", "agent.control", wire.agent_control("play", agent.id, room.id)),
    ]
    outcomes = (created, added, posted, claimed, settled, event, removed, deleted)
    outcomes += (by_agent, user_in, user_out)
    return [push for outcome in outcomes for push in outcome.pushes] + control


PUSHES = _all_pushes()


@pytest.mark.parametrize("push", PUSHES, ids=[f"{p.event}@{p.topic.split(':')[0]}" for p in PUSHES])
def test_push_payload_passes_the_sdk_validator(push: ops.Push) -> None:
    validate_event_payload(push.event, push.payload)


def test_agent_created_room_and_user_membership_push_to_the_right_topics() -> None:
    topics = [
        (p.topic.split(":")[0], p.event) for p in PUSHES[-8:-3]
    ]  # before the 3 control pushes
    assert topics == [
        ("agent_rooms", "room_added"),
        ("user_rooms", "room_added"),
        ("room_participants", "participant_added"),
        ("room_participants", "participant_removed"),
        ("user_rooms", "room_removed"),
    ]
    assert PUSHES[-7].payload["id"] == PUSHES[-8].payload["id"]  # same room


def test_every_pushed_event_kind_is_covered() -> None:
    assert {p.event for p in PUSHES} == {
        "room_added", "room_removed", "room_deleted", "participant_added",
        "participant_removed", "message_created", "message_updated", "event_created",
        "supersede", "agent.control",
    }  # fmt: skip
