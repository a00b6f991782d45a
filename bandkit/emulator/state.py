"""The emulator's data: plain models, no behaviour (operations live in `ops.py`).

Everything the platform remembers is here, so a restart from the state file keeps
agents, keys (as SHA-256 digests only), rooms, participants, messages and each
recipient's delivery state. `EmulatorState` is the one object that is persisted.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION: Literal["1"] = "1"


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
    inserted_at: str
    updated_at: str


class EmulatorState(_Model):
    """Everything persisted; mutated only by `ops.py`."""

    schema_version: Literal["1"] = SCHEMA_VERSION
    user: User
    agents: dict[str, AgentRecord] = Field(default_factory=dict)
    rooms: dict[str, Room] = Field(default_factory=dict)
    messages: dict[str, Message] = Field(default_factory=dict)
    # room id -> message ids in posting order
    room_messages: dict[str, list[str]] = Field(default_factory=dict)
    next_seq: int = 1
