"""Platform operations on agents, rooms and participants (messages: `messages.py`).

Operations validate, mutate `EmulatorState`, and say what to push.

Each operation takes the state, its arguments and `now` (an ISO timestamp the caller
reads from its clock), raises `ApiFailure` for a refused request, and returns its
result plus the `Push`es the channel layer must deliver. No IO, no asyncio, no clock:
the server is the only caller, and tests can drive these directly.
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bandkit.emulator import wire
from bandkit.emulator.errors import invalid, not_found
from bandkit.emulator.state import (
    AgentRecord,
    EmulatorState,
    Participant,
    ParticipantType,
    Role,
    Room,
    key_digest,
)

NewId = Callable[[], str]


def new_uuid() -> str:
    return str(uuid.uuid4())


def chat_room_topic(room_id: str) -> str:
    return f"chat_room:{room_id}"


def participants_topic(room_id: str) -> str:
    return f"room_participants:{room_id}"


def agent_rooms_topic(agent_id: str) -> str:
    return f"agent_rooms:{agent_id}"


def agent_control_topic(agent_id: str) -> str:
    return f"agent_control:{agent_id}"


def user_rooms_topic(user_id: str) -> str:
    return f"user_rooms:{user_id}"


@dataclass(frozen=True)
class Push:
    """One server push. Agent sockets get it only if `agents` is None (all) or names them."""

    topic: str
    event: str
    payload: dict[str, Any]
    users: bool = True
    agents: frozenset[str] | None = None
    # Also shown on the room's live page (room id), if any.
    page_room: str | None = None


@dataclass
class Outcome:
    """What an operation produced besides its return value: the pushes it sends, then the
    room channels an agent loses with its seat (`revoked`: agent id, topic), which the
    broker ends after delivering the pushes (the agent hears of its own removal first)."""

    pushes: list[Push] = field(default_factory=list)
    revoked: list[tuple[str, str]] = field(default_factory=list)

    def extend(self, other: Outcome) -> None:
        self.pushes += other.pushes
        self.revoked += other.revoked


def room_topics(room_id: str) -> tuple[str, str]:
    """The channels only a room's participants may hold (agents lose them when removed)."""
    return chat_room_topic(room_id), participants_topic(room_id)


# --- agents ---------------------------------------------------------------------------


def _handle_for(state: EmulatorState, name: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"
    taken = {a.handle for a in state.agents.values()} | {state.user.handle}
    handle, n = base, 2
    while handle in taken:
        handle, n = f"{base}-{n}", n + 1
    return handle


def register_agent(
    state: EmulatorState, name: str, description: str, now: str, new_id: NewId = new_uuid
) -> tuple[AgentRecord, str]:
    """Create an agent; the plain API key is returned once and only its digest is kept."""
    api_key = f"band_a_{secrets.token_urlsafe(32)}"
    agent = AgentRecord(
        id=new_id(),
        name=name,
        description=description,
        handle=_handle_for(state, name),
        key_sha256=key_digest(api_key),
        inserted_at=now,
        updated_at=now,
    )
    state.agents[agent.id] = agent
    return agent, api_key


def delete_agent(state: EmulatorState, agent_id: str, now: str) -> tuple[AgentRecord, Outcome]:
    agent = state.agents.get(agent_id)
    if agent is None:
        raise not_found("agent")
    out = Outcome()
    for room in list(state.rooms.values()):
        if (p := room.participants.get(agent_id)) is not None:
            out.extend(drop_participant(state, room, p, now))
    del state.agents[agent_id]
    _forget_agent(state, agent_id)
    return agent, out


def _forget_agent(state: EmulatorState, agent_id: str) -> None:
    """What dies with an agent: its memories, contacts and contact requests."""
    state.memories = {k: m for k, m in state.memories.items() if m.source_agent_id != agent_id}
    state.contacts = {k: c for k, c in state.contacts.items() if agent_id not in (c.a, c.b)}
    state.contact_requests = {
        k: r for k, r in state.contact_requests.items() if agent_id not in (r.from_id, r.to_id)
    }


# --- rooms and participants -----------------------------------------------------------


def create_room(
    state: EmulatorState,
    title: str | None,
    task_id: str | None,
    now: str,
    new_id: NewId = new_uuid,
    *,
    owner_agent: str | None = None,
) -> tuple[Room, Outcome]:
    """A room owned by the user, or by `owner_agent` (the agent API's create: user not in it)."""
    room = Room(id=new_id(), title=title, task_id=task_id, inserted_at=now, updated_at=now)
    if owner_agent is None:
        owner = Participant(
            id=state.user.id, type=ParticipantType.USER, role=Role.OWNER, joined_at=now
        )
        push = Push(
            user_rooms_topic(state.user.id), "room_added", wire.room(room), agents=frozenset()
        )
    else:
        owner = Participant(
            id=owner_agent, type=ParticipantType.AGENT, role=Role.OWNER, joined_at=now
        )
        push = Push(agent_rooms_topic(owner_agent), "room_added", wire.room(room), users=False)
    room.participants[owner.id] = owner
    state.rooms[room.id] = room
    state.room_messages[room.id] = []
    return room, Outcome([push])


def get_room(state: EmulatorState, room_id: str) -> Room:
    room = state.rooms.get(room_id)
    if room is None:
        raise not_found("chat room")
    return room


def room_for_agent(state: EmulatorState, room_id: str, agent_id: str) -> Room:
    """The room, if this agent is in it; otherwise 404 (rooms you are not in are invisible)."""
    room = state.rooms.get(room_id)
    if room is None or agent_id not in room.participants:
        raise not_found("chat room")
    return room


def delete_room(state: EmulatorState, room_id: str) -> Outcome:
    room = get_room(state, room_id)
    out = Outcome()
    payload = wire.room(room)
    out.pushes.append(
        Push(participants_topic(room_id), "room_deleted", {"id": room_id}, page_room=room_id)
    )
    for p in room.participants.values():
        if p.type is ParticipantType.AGENT:
            out.pushes.append(Push(agent_rooms_topic(p.id), "room_removed", payload, users=False))
            out.revoked += [(p.id, topic) for topic in room_topics(room_id)]
    out.pushes.append(
        Push(user_rooms_topic(state.user.id), "room_removed", payload, agents=frozenset())
    )
    for message_id in state.room_messages.pop(room_id, []):
        state.messages.pop(message_id, None)
    state.tasks.pop(room_id, None)
    state.boards.pop(room_id, None)
    state.files = {k: f for k, f in state.files.items() if f.room_id != room_id}
    del state.rooms[room_id]
    return out


def add_participant(
    state: EmulatorState, room_id: str, participant_id: str, role: Role, now: str
) -> tuple[Participant, Outcome]:
    """Add an agent, or the user (whom agents may invite into rooms they created)."""
    room = get_room(state, room_id)
    if participant_id in room.participants:
        raise invalid("/participant/participant_id", "is already a participant")
    if participant_id == state.user.id:
        kind = ParticipantType.USER
    elif participant_id in state.agents:
        kind = ParticipantType.AGENT
    else:
        raise not_found("participant")
    p = Participant(id=participant_id, type=kind, role=role, joined_at=now)
    room.participants[participant_id] = p
    room.updated_at = now
    if kind is ParticipantType.USER:
        topic, users, agents = user_rooms_topic(participant_id), True, frozenset[str]()
    else:
        topic, users, agents = agent_rooms_topic(participant_id), False, None
    out = Outcome(
        [
            Push(topic, "room_added", wire.room(room), users=users, agents=agents),
            Push(
                participants_topic(room_id),
                "participant_added",
                wire.participant_push(state, p),
                page_room=room_id,
            ),
        ]
    )
    return p, out


def remove_participant(
    state: EmulatorState, room_id: str, participant_id: str, now: str
) -> tuple[Participant, Outcome]:
    """Remove anyone but the room's owner (an owner leaves only with its room or agent)."""
    room = get_room(state, room_id)
    p = room.participants.get(participant_id)
    if p is None:
        raise not_found("participant")
    if p.role is Role.OWNER:
        raise invalid("/participant_id", "is the room owner and cannot be removed")
    return p, drop_participant(state, room, p, now)


def drop_participant(state: EmulatorState, room: Room, p: Participant, now: str) -> Outcome:
    """Take `p` out of `room` unchecked, with the pushes the platform sends."""
    payload = wire.participant_push(state, p)
    del room.participants[p.id]
    room.updated_at = now
    removed = Push(participants_topic(room.id), "participant_removed", payload, page_room=room.id)
    if p.type is ParticipantType.USER:  # the user watches every room: it keeps its channels
        gone = Push(user_rooms_topic(p.id), "room_removed", wire.room(room), agents=frozenset())
        return Outcome([removed, gone])
    gone = Push(agent_rooms_topic(p.id), "room_removed", wire.room(room), users=False)
    return Outcome([removed, gone], [(p.id, topic) for topic in room_topics(room.id)])
