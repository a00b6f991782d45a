"""The emulator's data: plain models, no behaviour (operations live in `ops.py`).

Everything the platform remembers is here, so a restart from the state file keeps
agents, keys (as SHA-256 digests only), rooms, participants, messages and each
recipient's delivery state, memories, room tasks and boards, files and contacts.
A state file from before those existed loads with them empty. `EmulatorState` is the
one object that is persisted.
"""

from __future__ import annotations

import hashlib
import uuid
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION: Literal["1"] = "1"


def new_platform_id() -> str:
    """A platform's identity: made once with its state, kept in the state file, so the
    records made on it (manifests) name this platform and not its transient URL."""
    return f"emu_{uuid.uuid4().hex}"


def key_digest(api_key: str) -> str:
    """The only form in which an API key is ever stored or compared."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParticipantType(StrEnum):
    USER = "User"
    AGENT = "Agent"


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"


class DeliveryStatus(StrEnum):
    DELIVERED = "delivered"
    PROCESSING = "processing"
    PROCESSED = "processed"
    FAILED = "failed"


class User(_Model):
    id: str
    name: str  # the first name (profile PUT `first_name`)
    last_name: str | None = None
    handle: str
    email: str
    inserted_at: str


class AgentRecord(_Model):
    id: str
    name: str
    description: str
    handle: str
    key_sha256: str
    inserted_at: str
    updated_at: str


class Participant(_Model):
    id: str
    type: ParticipantType
    role: Role
    joined_at: str


class Room(_Model):
    id: str
    title: str | None = None
    task_id: str | None = None
    inserted_at: str
    updated_at: str
    # Insertion order is join order.
    participants: dict[str, Participant] = Field(default_factory=dict)


class Attempt(_Model):
    attempt_number: int
    status: DeliveryStatus
    started_at: str
    finished_at: str | None = None
    error: str | None = None


class Delivery(_Model):
    status: DeliveryStatus = DeliveryStatus.DELIVERED
    attempts: list[Attempt] = Field(default_factory=list)
    # Set once the attempt cap is reached: failed for good, `/next` no longer serves it.
    given_up: bool = False

    @property
    def current_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


class Mention(_Model):
    id: str
    handle: str | None = None
    name: str | None = None


class Message(_Model):
    id: str
    seq: int  # room-independent, strictly increasing: the cursor and the sort key
    room_id: str
    content: str
    message_type: str
    sender_id: str
    sender_type: ParticipantType
    sender_name: str
    mentions: list[Mention] = Field(default_factory=list)
    # agent id -> delivery; only agents that are recipients have one
    deliveries: dict[str, Delivery] = Field(default_factory=dict)
    extra_metadata: dict[str, object] = Field(default_factory=dict)
    # `Attachment`s as rendered at posting time (files never change)
    attachments: list[dict[str, object]] = Field(default_factory=list)
    inserted_at: str
    updated_at: str


class Memory(_Model):
    """An agent's stored memory (`AgentMemory`); only its source agent sees it."""

    id: str
    source_agent_id: str
    content: str
    thought: str
    system: str
    type: str
    segment: str
    scope: str
    subject_id: str | None = None
    metadata: dict[str, object] = Field(default_factory=dict)
    status: str = "active"
    inserted_at: str
    updated_at: str


class Actor(_Model):
    id: str
    type: ParticipantType


class TaskEvent(_Model):
    actor: Actor
    at: str
    event: str
    payload: dict[str, object] = Field(default_factory=dict)


class TaskAssignment(_Model):
    assignee: Actor
    status: str
    active_form: str = ""
    linked_native_id: str = ""
    updated_at: str


class Task(_Model):
    id: str
    number: int
    room_id: str
    subject: str
    detail: str = ""
    state: str = "active"
    created_by: Actor
    assignments: list[TaskAssignment] = Field(default_factory=list)
    history: list[TaskEvent] = Field(default_factory=list)
    superseded_by_id: str | None = None
    inserted_at: str
    updated_at: str


class Board(_Model):
    goal_title: str | None = None
    goal_summary: str | None = None
    created_by: Actor | None = None
    updated_by: Actor | None = None
    history: list[TaskEvent] = Field(default_factory=list)
    inserted_at: str | None = None
    updated_at: str | None = None


class StoredFile(_Model):
    """A room attachment; the bytes live in the state file (base64), under size caps."""

    id: str
    room_id: str
    uploader_id: str
    name: str
    content_type: str
    sha256: str
    size: int
    data_b64: str
    inserted_at: str


class ContactRequest(_Model):
    id: str
    from_id: str
    to_id: str
    message: str | None = None
    status: str = "pending"  # pending, approved, rejected, cancelled
    inserted_at: str
    updated_at: str


class Contact(_Model):
    """One contact relationship; both directions at once (`a` and `b`)."""

    id: str
    a: str
    b: str
    inserted_at: str


class EmulatorState(_Model):
    """Everything persisted; mutated only by `ops.py`."""

    schema_version: Literal["1"] = SCHEMA_VERSION
    # Made with the state (a state file from before it gets one at its next load and
    # keeps it from then on: the load is saved at startup).
    platform_id: str = Field(default_factory=new_platform_id)
    user: User
    agents: dict[str, AgentRecord] = Field(default_factory=dict)
    rooms: dict[str, Room] = Field(default_factory=dict)
    messages: dict[str, Message] = Field(default_factory=dict)
    # room id -> message ids in posting order
    room_messages: dict[str, list[str]] = Field(default_factory=dict)
    next_seq: int = 1
    memories: dict[str, Memory] = Field(default_factory=dict)
    # room id -> task id -> task; room id -> board; file id -> file
    tasks: dict[str, dict[str, Task]] = Field(default_factory=dict)
    boards: dict[str, Board] = Field(default_factory=dict)
    files: dict[str, StoredFile] = Field(default_factory=dict)
    contact_requests: dict[str, ContactRequest] = Field(default_factory=dict)
    contacts: dict[str, Contact] = Field(default_factory=dict)
