"""Room messages projected onto what the circuit breaker observes.

Pure: no IO and no clock. The conductor reads the room, turns each platform message into a
``RoomMessage`` (``from_band_rest``) and hands each batch to a ``RoomProjector``, which
returns the ``ObservedMessage`` values to feed to the breaker, oldest first.

Rules:

* sender: the PM, developer and architect are known by agent id; any other ``User`` is
  HUMAN; anything else (another agent, an unknown type) is UNKNOWN;
* presenter: a HUMAN message that the conductor did not post itself (the conductor posts
  with the presenter's identity, so it tracks the ids of its own posts). When the roster
  names a ``presenter_id``, only that user is the presenter;
* decision: an architect message matching ``DECISION_MARKER`` (``decision:`` or
  ``verdict:``, any case). The same words from anyone else decide nothing;
* end signal: a presenter message matching ``END_PHRASE``: ``/end`` at its start, or
  ``end meeting``, ``wrap up`` or ``adjourn(ed)`` anywhere, any case, at any time;
* architect mentioned: the architect's id (or one of its handles) in the message's mentions,
  or ``@<handle>`` in its text, any case, for any of the roster's architect handles;
* batches: a message id is projected once (the first copy wins, across batches too); the
  conductor's own posts are skipped; the rest sort by ``created_at`` (naive stamps read as
  UTC, unstamped messages first, ties keep arrival order). The platform stamp orders messages
  and becomes ``ObservedMessage.timestamp`` (0.0 when unstamped); no timer reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime

from examples.docker_demo.breaker import ObservedMessage, SenderClass

DECISION_MARKER = re.compile(r"\b(?:decision|verdict)\s*:", re.IGNORECASE)
END_PHRASE = re.compile(
    r"^\s*/end\b|\bend\s+meeting\b|\bwrap\s+up\b|\badjourn(?:ed)?\b", re.IGNORECASE
)
END_PHRASE_HINT = "end meeting"  # the phrase the open-floor invite tells the presenter to post

USER_SENDER_TYPE = "User"
AGENT_SENDER_TYPE = "Agent"
_OLDEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class RoomMessage:
    """One text message in the room, independent of the client library that read it."""

    id: str
    sender_id: str
    sender_type: str  # "Agent" or "User", as the platform spells it
    text: str
    mentions: tuple[str, ...] = ()  # mentioned participant ids (a handle when no id was given)
    created_at: datetime | None = None


@dataclass(frozen=True)
class Roster:
    """The room's known participants: who is who, and how the architect is addressed."""

    pm_id: str
    dev_id: str
    architect_id: str
    architect_handles: tuple[str, ...] = ()  # display names or handles written after "@"
    presenter_id: str | None = None  # None: every human but the conductor's posts presents

    def __post_init__(self) -> None:
        ids = (self.pm_id, self.dev_id, self.architect_id)
        if not all(ids) or len(set(ids)) != len(ids):
            raise ValueError(f"roster needs three distinct, non-empty agent ids, got {ids!r}")
        if any(not handle.strip() for handle in self.architect_handles):
            raise ValueError("roster architect handles must not be blank")


def classify_sender(message: RoomMessage, roster: Roster) -> SenderClass:
    """The sender's class: by agent id first, then by sender type."""
    match message.sender_id:
        case roster.pm_id:
            return SenderClass.PM
        case roster.dev_id:
            return SenderClass.DEVELOPER
        case roster.architect_id:
            return SenderClass.ARCHITECT
    if message.sender_type.casefold() == USER_SENDER_TYPE.casefold():
        return SenderClass.HUMAN
    return SenderClass.UNKNOWN


def is_final_decision(message: RoomMessage, roster: Roster) -> bool:
    """True for an architect message that carries the decision marker."""
    return classify_sender(message, roster) is SenderClass.ARCHITECT and bool(
        DECISION_MARKER.search(message.text)
    )


def is_end_phrase(text: str) -> bool:
    """True when ``text`` says the meeting is over (only a presenter's words count)."""
    return END_PHRASE.search(text) is not None


def mentions_architect(message: RoomMessage, roster: Roster) -> bool:
    """True when the message mentions the architect by id, by handle, or as ``@<handle>``."""
    if roster.architect_id in message.mentions:
        return True
    handles = {handle.casefold() for handle in roster.architect_handles}
    if any(mention.casefold() in handles for mention in message.mentions):
        return True
    return any(
        re.search("@" + re.escape(handle) + r"(?!\w)", message.text, re.IGNORECASE)
        for handle in roster.architect_handles
    )


def is_presenter(
    message: RoomMessage, roster: Roster, own_post_ids: AbstractSet[str] = frozenset()
) -> bool:
    """True for the presenter's own words: a human message the conductor did not post."""
    if message.id in own_post_ids or classify_sender(message, roster) is not SenderClass.HUMAN:
        return False
    return roster.presenter_id is None or message.sender_id == roster.presenter_id


def aware(stamp: datetime | None) -> datetime:
    """A comparable instant: naive stamps read as UTC, a missing stamp as the oldest."""
    if stamp is None:
        return _OLDEST
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def to_observed(
    message: RoomMessage, roster: Roster, own_post_ids: AbstractSet[str] = frozenset()
) -> ObservedMessage:
    """The breaker's view of one message."""
    presenter = is_presenter(message, roster, own_post_ids)
    stamp = 0.0 if message.created_at is None else aware(message.created_at).timestamp()
    return ObservedMessage(
        sender_class=classify_sender(message, roster),
        timestamp=stamp,
        mentions_architect=mentions_architect(message, roster),
        is_final_decision=is_final_decision(message, roster),
        is_presenter=presenter,
        is_end_signal=presenter and is_end_phrase(message.text),
    )


def select_new(
    messages: Iterable[RoomMessage], *, seen: AbstractSet[str], own_post_ids: AbstractSet[str]
) -> list[RoomMessage]:
    """Unseen messages, each id once, without the conductor's own posts, oldest first."""
    fresh: dict[str, RoomMessage] = {}
    for message in messages:
        if message.id not in seen and message.id not in own_post_ids:
            fresh.setdefault(message.id, message)
    return sorted(fresh.values(), key=lambda message: aware(message.created_at))


class RoomProjector:
    """Remembers what the conductor has seen and posted; projects each new batch."""

    def __init__(self, roster: Roster) -> None:
        self.roster = roster
        self._seen: set[str] = set()
        self._own_posts: set[str] = set()

    @property
    def seen_ids(self) -> frozenset[str]:
        return frozenset(self._seen)

    def note_own_post(self, message_id: str) -> None:
        """Remember a message the conductor posted, so it is never taken for the presenter."""
        self._own_posts.add(message_id)

    def project(self, batch: Iterable[RoomMessage]) -> list[ObservedMessage]:
        """The new messages of ``batch``, projected, oldest first; marks every id seen."""
        return [observed for _, observed in self.project_pairs(batch)]

    def project_pairs(
        self, batch: Iterable[RoomMessage]
    ) -> list[tuple[RoomMessage, ObservedMessage]]:
        """Like ``project``, each projection beside its message (for the transcript)."""
        messages = list(batch)
        fresh = select_new(messages, seen=self._seen, own_post_ids=self._own_posts)
        self._seen.update(message.id for message in messages)
        return [(m, to_observed(m, self.roster, self._own_posts)) for m in fresh]


def from_band_rest(obj: object) -> RoomMessage:
    """A ``RoomMessage`` from a ``band_rest`` ``ChatMessage`` (or an object or mapping shaped
    like one): ``content`` (or ``text``), ``inserted_at`` (or ``created_at``, a datetime or an
    ISO-8601 string) and mentions from ``metadata.mentions`` (or ``mentions``)."""
    message_id, sender_id = _text(obj, "id"), _text(obj, "sender_id")
    if not message_id or not sender_id:
        raise ValueError(f"room message needs an id and a sender_id, got {type(obj).__name__}")
    return RoomMessage(
        id=message_id,
        sender_id=sender_id,
        sender_type=_text(obj, "sender_type"),
        text=_text(obj, "content") or _text(obj, "text"),
        mentions=_mentions(obj),
        created_at=_stamp(_field(obj, "inserted_at")) or _stamp(_field(obj, "created_at")),
    )


def _field(obj: object, name: str) -> object:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _text(obj: object, name: str) -> str:
    value = _field(obj, name)
    return "" if value is None else str(value)


def _mentions(obj: object) -> tuple[str, ...]:
    items = _field(_field(obj, "metadata"), "mentions") or _field(obj, "mentions")
    if not isinstance(items, Iterable) or isinstance(items, str | bytes):
        return ()
    keys: list[str] = []
    for item in items:
        key = item if isinstance(item, str) else _text(item, "id") or _text(item, "handle")
        if key and key not in keys:
            keys.append(key)
    return tuple(keys)


def _stamp(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None  # an unreadable stamp sorts like a missing one
    return None
