"""JSON shapes the real SDK parses, rendered from state (one function per shape).

Shapes follow `band_rest`'s Fern models and `band_sdk_core`'s push validators; see
`reference/band-protocol.md`. Nothing here mutates state.
"""

from __future__ import annotations

import uuid
from typing import Any

from bandkit.emulator.state import (
    AgentRecord,
    Delivery,
    DeliveryStatus,
    EmulatorState,
    Message,
    Participant,
    ParticipantType,
    Room,
    StoredFile,
    User,
)

JSON = dict[str, Any]


def room(r: Room) -> JSON:
    """`ChatRoom`: also the `room_added`/`room_removed` push payload."""
    out: JSON = {"id": r.id, "inserted_at": r.inserted_at, "updated_at": r.updated_at}
    if r.title is not None:
        out["title"] = r.title
    if r.task_id is not None:
        out["task_id"] = r.task_id
    return out


def me_room(state: EmulatorState, r: Room) -> JSON:
    """`MeChatRoom` for the human API."""
    agents = [
        {"id": a.id, "name": a.name, "handle": a.handle, "type": "Agent"}
        for p in r.participants.values()
        if p.type is ParticipantType.AGENT and (a := state.agents.get(p.id)) is not None
    ]
    ids = state.room_messages.get(r.id, [])
    last = state.messages[ids[-1]].inserted_at if ids else None
    return {
        **room(r),
        "type": "group",
        "status": "active",
        "agents": agents,
        "last_message_at": last,
    }


def user_name(u: User) -> str:
    """Display name: first and last name."""
    return f"{u.name} {u.last_name}" if u.last_name else u.name


def user_details(u: User) -> JSON:
    """`UserDetails` for `GET`/`PUT /me/profile`."""
    return {
        "id": u.id,
        "email": u.email,
        "handle": u.handle,
        "role": "user",
        "first_name": u.name,
        "last_name": u.last_name,
    }


def who(state: EmulatorState, p: Participant) -> tuple[str, str, str | None]:
    """(name, handle, description) of a participant."""
    if p.type is ParticipantType.USER:
        return user_name(state.user), state.user.handle, None
    agent = state.agents[p.id]
    return agent.name, agent.handle, agent.description


def participant(state: EmulatorState, p: Participant) -> JSON:
    """`ChatParticipant` (and the agent API's participant list entry)."""
    name, handle, _ = who(state, p)
    return {
        "id": p.id,
        "name": name,
        "handle": handle,
        "type": p.type.value,
        "role": p.role.value,
        "status": "active",
    }


def participant_details(state: EmulatorState, p: Participant, *, online: bool) -> JSON:
    """`ChatParticipantDetails` for the human API's list."""
    _, _, description = who(state, p)
    out = participant(state, p)
    out.update(
        {
            "is_external": p.type is ParticipantType.AGENT,
            "online": online,
            "connection_status": "connected" if online else "disconnected",
        }
    )
    if description is not None:
        out["description"] = description
    return out


def participant_push(state: EmulatorState, p: Participant) -> JSON:
    """`participant_added` / `participant_removed` payload."""
    name, handle, _ = who(state, p)
    return {"id": p.id, "name": name, "type": p.type.value, "handle": handle}


def peer(a: AgentRecord, *, online: bool) -> JSON:
    """`Peer` for `GET /agent/peers`: a sibling agent (same owner) an agent may recruit."""
    return {
        "id": a.id,
        "name": a.name,
        "handle": a.handle,
        "description": a.description,
        "type": "Agent",
        "source": "registry",
        "is_contact": False,
        "is_external": True,
        "online": online,
    }


def delivery_status(m: Message) -> JSON:
    return {
        agent_id: {
            "status": d.status.value,
            "current_attempt": len(d.attempts),
            "attempts": [a.model_dump(exclude_none=True) for a in d.attempts],
        }
        for agent_id, d in m.deliveries.items()
    }


def message(m: Message) -> JSON:
    """`ChatMessage`: REST shape and the `message_created`/`message_updated` payload."""
    metadata: JSON = {
        "mentions": [mention.model_dump(exclude_none=True) for mention in m.mentions],
        **m.extra_metadata,
    }
    if m.deliveries:
        metadata["delivery_status"] = delivery_status(m)
    return {
        "id": m.id,
        "chat_room_id": m.room_id,
        "content": m.content,
        "message_type": m.message_type,
        "sender_id": m.sender_id,
        "sender_type": m.sender_type.value,
        "sender_name": m.sender_name,
        "inserted_at": m.inserted_at,
        "updated_at": m.updated_at,
        "metadata": metadata,
        **({"attachments": m.attachments} if m.attachments else {}),
    }


def attachment(f: StoredFile) -> JSON:
    """`Attachment` (an uploaded room file)."""
    return {
        "id": f.id,
        "name": f.name,
        "content_type": f.content_type,
        "bytes": f.size,
        "sha256": f.sha256,
        "has_thumb": False,
        "expires_at": None,
    }


def status_response(m: Message, agent_id: str) -> JSON:
    """`MessageStatusResponse` for processing/processed/failed."""
    d = m.deliveries[agent_id]
    return {
        "id": m.id,
        "status": d.status.value,
        "attempt_number": len(d.attempts),
        "success": True,
    }


def agent_me(a: AgentRecord, owner_id: str) -> JSON:
    return {
        "id": a.id,
        "name": a.name,
        "description": a.description,
        "handle": a.handle,
        "owner_uuid": owner_id,
        "feature_flags": {},
        "inserted_at": a.inserted_at,
        "updated_at": a.updated_at,
    }


def my_agent(a: AgentRecord) -> JSON:
    return {
        "id": a.id,
        "name": a.name,
        "description": a.description,
        "slug": a.handle,
        "is_external": True,
        "inserted_at": a.inserted_at,
        "updated_at": a.updated_at,
    }


def supersede() -> JSON:
    """`supersede` on `agent_control:A` (terminal for the SDK: it stops reconnecting)."""
    return {
        "reason": "superseded",
        "message": "A newer connection for this agent took over.",
        "retryable": False,
        "correlation_id": str(uuid.uuid4()),
    }


def agent_control(mode: str, agent_id: str, room_id: str | None) -> JSON:
    """`agent.control` on `agent_control:A`: interrupt, stop or play, agent- or room-scoped."""
    return {
        "mode": mode,
        "scope": "room" if room_id is not None else "agent",
        "agent_id": agent_id,
        "room_id": room_id,
        "execution_id": str(uuid.uuid4()),
        "correlation_id": str(uuid.uuid4()),
    }


def redacted(state: EmulatorState) -> JSON:
    """The control API's snapshot: the whole state minus key digests and file bytes."""
    dumped = state.model_dump(mode="json")
    for agent in dumped["agents"].values():
        agent.pop("key_sha256", None)
    for stored in dumped["files"].values():
        stored.pop("data_b64", None)  # the bytes: download them instead
    return dumped


def is_pending(status: DeliveryStatus) -> bool:
    """Not yet processed (processing/failed get replayed, see `is_outstanding`)."""
    return status is not DeliveryStatus.PROCESSED


def is_outstanding(d: Delivery) -> bool:
    """What `/next` serves: not processed and not given up at the attempt cap."""
    return is_pending(d.status) and not d.given_up
