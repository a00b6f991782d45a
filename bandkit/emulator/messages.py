"""Message operations: post (text and events), `/next`, and the delivery lifecycle.

Same contract as `ops.py`: state and `now` in, `ApiFailure` for refusals, result plus
`Push`es out; no IO, no clock. Delivery rule: every mentioned agent other than the
sender is a recipient and gets a `Delivery`; only recipients are sent
`message_created`, and `message_updated` goes to human observers only.

Attempt cap: a delivery gets at most `MAX_DELIVERY_ATTEMPTS` processing attempts. The
attempt that reaches the cap and fails (or a claim beyond it, after an agent died
during its last attempt) marks the delivery failed for good (`given_up`): `/next` and
the outstanding list no longer serve it, so one failing message is not retried by
every later start of the agent. Whether the real platform caps attempts is unverified.
"""

from __future__ import annotations

from typing import Any

from bandkit.emulator import wire
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.ops import NewId, Outcome, Push, chat_room_topic, new_uuid
from bandkit.emulator.state import (
    Attempt,
    Delivery,
    DeliveryStatus,
    EmulatorState,
    Mention,
    Message,
    ParticipantType,
    Room,
)

MAX_DELIVERY_ATTEMPTS = 3
GAVE_UP = "delivery attempt cap reached"
EVENT_TYPES = frozenset({"tool_call", "tool_result", "thought", "error", "task", "attention"})
_NOT_IN_ROOM = "mentioned participant is not in the room"


def _resolve_mentions(
    state: EmulatorState, room: Room, raw: list[dict[str, Any]], pointer: str
) -> list[Mention]:
    by_handle: dict[str, str] = {}
    by_name: dict[str, str] = {}
    for p in room.participants.values():
        p_name, p_handle, _ = wire.who(state, p)
        by_handle[p_handle.lstrip("@")] = p.id
        by_name[p_name] = p.id
    resolved: list[Mention] = []
    for item in raw:
        raw_id, handle, name = item.get("id"), item.get("handle"), item.get("name")
        pid: str | None = (
            raw_id if isinstance(raw_id, str) and raw_id in room.participants else None
        )
        if pid is None and isinstance(handle, str):
            pid = by_handle.get(handle.lstrip("@"))
        if pid is None and isinstance(name, str):
            pid = by_name.get(name)
        if pid is None:
            raise invalid(pointer, "mentioned participant is not in the room", _NOT_IN_ROOM)
        if pid not in {m.id for m in resolved}:
            who_name, who_handle, _ = wire.who(state, room.participants[pid])
            resolved.append(Mention(id=pid, handle=who_handle, name=who_name))
    return resolved


def _store(state: EmulatorState, message: Message) -> None:
    state.messages[message.id] = message
    state.room_messages.setdefault(message.room_id, []).append(message.id)
    state.next_seq += 1


def post_message(
    state: EmulatorState,
    room: Room,
    sender_id: str,
    content: str,
    raw_mentions: list[dict[str, Any]],
    now: str,
    new_id: NewId = new_uuid,
    attachment_ids: list[str] | None = None,
) -> tuple[Message, list[dict[str, Any]], Outcome]:
    """Store a text message; every mentioned agent other than the sender is a recipient.
    `attachment_ids` must name files of this room (422 otherwise)."""
    sender = room.participants.get(sender_id)
    if sender is None:  # the user, in a room an agent created without inviting it
        raise ApiFailure(403, "forbidden", "only the room's participants can post in it")
    mentions = _resolve_mentions(state, room, raw_mentions, "/message/mentions")
    attachments = []
    for file_id in dict.fromkeys(attachment_ids or []):
        stored = state.files.get(file_id)
        if stored is None or stored.room_id != room.id:
            raise invalid("/message/attachment_ids", "names a file that is not in this room")
        attachments.append(wire.attachment(stored))
    sender_name, _, _ = wire.who(state, sender)
    recipients = [m for m in mentions if m.id != sender_id]
    message = Message(
        id=new_id(),
        seq=state.next_seq,
        room_id=room.id,
        content=content,
        message_type="text",
        sender_id=sender_id,
        sender_type=sender.type,
        sender_name=sender_name,
        mentions=mentions,
        deliveries={
            m.id: Delivery()
            for m in recipients
            if room.participants[m.id].type is ParticipantType.AGENT
        },
        attachments=attachments,
        inserted_at=now,
        updated_at=now,
    )
    _store(state, message)
    room.updated_at = now
    push = Push(
        chat_room_topic(room.id),
        "message_created",
        wire.message(message),
        agents=frozenset(message.deliveries),
        page_room=room.id,
    )
    recipients_json = [{"id": m.id, "handle": m.handle, "name": m.name} for m in recipients]
    return message, recipients_json, Outcome([push])


def post_event(
    state: EmulatorState,
    room: Room,
    agent_id: str,
    content: str,
    message_type: str,
    metadata: dict[str, Any],
    now: str,
    new_id: NewId = new_uuid,
) -> tuple[Message, Outcome]:
    """Store an agent event (thought, tool call, ...): shown to observers, never delivered."""
    agent = state.agents[agent_id]
    message = Message(
        id=new_id(),
        seq=state.next_seq,
        room_id=room.id,
        content=content,
        message_type=message_type,
        sender_id=agent_id,
        sender_type=ParticipantType.AGENT,
        sender_name=agent.name,
        extra_metadata=metadata,
        inserted_at=now,
        updated_at=now,
    )
    _store(state, message)
    push = Push(
        chat_room_topic(room.id),
        "event_created",
        wire.message(message),
        agents=frozenset(),
        page_room=room.id,
    )
    return message, Outcome([push])


def room_messages(state: EmulatorState, room_id: str) -> list[Message]:
    return [state.messages[i] for i in state.room_messages.get(room_id, [])]


def next_message(state: EmulatorState, room: Room, agent_id: str) -> Message | None:
    """The oldest message addressed to this agent that it has not processed."""
    for message in room_messages(state, room.id):
        delivery = message.deliveries.get(agent_id)
        if delivery is not None and wire.is_outstanding(delivery):
            return message
    return None


def _delivery(state: EmulatorState, room: Room, message_id: str, agent_id: str) -> Message:
    message = state.messages.get(message_id)
    if message is None or message.room_id != room.id or agent_id not in message.deliveries:
        raise not_found("message")
    return message


def _updated(message: Message, now: str) -> Outcome:
    message.updated_at = now
    return Outcome(
        [
            Push(
                chat_room_topic(message.room_id),
                "message_updated",
                wire.message(message),
                agents=frozenset(),
                page_room=message.room_id,
            )
        ]
    )


def mark_processing(
    state: EmulatorState,
    room: Room,
    message_id: str,
    agent_id: str,
    now: str,
    max_attempts: int = MAX_DELIVERY_ATTEMPTS,
) -> tuple[Message, Outcome]:
    """Open a new attempt; a processed message cannot be claimed again (422).

    A claim beyond `max_attempts` opens nothing: it closes an attempt left open, marks
    the delivery failed for good and returns; the caller then answers 422 (`given_up`).
    """
    message = _delivery(state, room, message_id, agent_id)
    delivery = message.deliveries[agent_id]
    if delivery.status is DeliveryStatus.PROCESSED:
        raise invalid("/status", "message is already processed")
    if delivery.given_up:
        raise cap_refusal()
    current = delivery.current_attempt
    if current is not None and current.status is DeliveryStatus.PROCESSING:
        current.status = DeliveryStatus.FAILED
        current.finished_at = now
        current.error = "superseded by a new processing attempt"
    if len(delivery.attempts) >= max_attempts:
        if current is not None:
            current.error = GAVE_UP
        delivery.status = DeliveryStatus.FAILED
        delivery.given_up = True
        return message, _updated(message, now)
    delivery.attempts.append(
        Attempt(
            attempt_number=len(delivery.attempts) + 1,
            status=DeliveryStatus.PROCESSING,
            started_at=now,
        )
    )
    delivery.status = DeliveryStatus.PROCESSING
    return message, _updated(message, now)


def settle(
    state: EmulatorState,
    room: Room,
    message_id: str,
    agent_id: str,
    outcome: DeliveryStatus,
    now: str,
    error: str | None = None,
    max_attempts: int = MAX_DELIVERY_ATTEMPTS,
) -> tuple[Message, Outcome]:
    """Close the current processing attempt as processed or failed (422 if there is none);
    a failure of the `max_attempts`-th attempt is final."""
    message = _delivery(state, room, message_id, agent_id)
    delivery = message.deliveries[agent_id]
    current = delivery.current_attempt
    if current is None or current.status is not DeliveryStatus.PROCESSING:
        raise ApiFailure(
            422,
            "validation_error",
            "message has no current processing attempt",
            {"/processing_attempt": ["no processing attempt is open for this message"]},
        )
    current.status = outcome
    current.finished_at = now
    current.error = error
    delivery.status = outcome
    if outcome is DeliveryStatus.FAILED and len(delivery.attempts) >= max_attempts:
        delivery.given_up = True
    return message, _updated(message, now)


def cap_refusal() -> ApiFailure:
    """The 422 a claim gets once its delivery has been given up."""
    return ApiFailure(
        422,
        "validation_error",
        f"message failed for good: {GAVE_UP}",
        {"/processing_attempt": [GAVE_UP]},
    )
