"""Room messages projected for the breaker: senders, markers, mentions, batches, and the
adapter from real ``band_rest`` models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from band_rest.types import ChatMessage

from examples.docker_demo.breaker import Action, BreakerConfig, CircuitBreaker, SenderClass
from examples.docker_demo.projection import (
    END_PHRASE_HINT,
    RoomMessage,
    RoomProjector,
    Roster,
    classify_sender,
    from_band_rest,
    is_end_phrase,
    is_final_decision,
    mentions_architect,
    select_new,
    to_observed,
)

PM_ID, DEV_ID, ARCH_ID, PRESENTER_ID = "agent-pm", "agent-dev", "agent-arch", "user-1"
ROSTER = Roster(PM_ID, DEV_ID, ARCH_ID, ("Jordan (Architect)",), PRESENTER_ID)
T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def room(
    sender_id: str = PM_ID,
    text: str = "hello",
    *,
    id: str = "m1",
    mentions: tuple[str, ...] = (),
    at: datetime | None = T0,
) -> RoomMessage:
    sender_type = "User" if sender_id.startswith("user") else "Agent"
    return RoomMessage(id, sender_id, sender_type, text, mentions, at)


@pytest.mark.parametrize(
    ("sender_id", "sender_type", "expected"),
    [
        (PM_ID, "Agent", SenderClass.PM),
        (DEV_ID, "Agent", SenderClass.DEVELOPER),
        (ARCH_ID, "Agent", SenderClass.ARCHITECT),
        (ARCH_ID, "User", SenderClass.ARCHITECT),  # the id decides first
        (PRESENTER_ID, "User", SenderClass.HUMAN),
        ("user-2", "user", SenderClass.HUMAN),
        ("agent-other", "Agent", SenderClass.UNKNOWN),
        ("someone", "", SenderClass.UNKNOWN),
    ],
)
def test_senders_are_classified_by_id(
    sender_id: str, sender_type: str, expected: SenderClass
) -> None:
    message = RoomMessage("m1", sender_id, sender_type, "hi")
    assert classify_sender(message, ROSTER) is expected


@pytest.mark.parametrize(
    ("text", "decides"),
    [
        ("Decision: ship the sandbox runner", True),
        ("VERDICT : go with option B", True),
        ("Final verdict:\nB", True),
        ("My decision is B", False),
        ("indecision: still thinking", False),
        ("Let me review this first.", False),
    ],
)
def test_decision_marker_only_from_the_architect(text: str, decides: bool) -> None:
    assert is_final_decision(room(ARCH_ID, text), ROSTER) is decides
    assert is_final_decision(room(PM_ID, text), ROSTER) is False
    assert is_final_decision(room(PRESENTER_ID, text), ROSTER) is False


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("/end", True),
        ("  /END now", True),
        ("please /end", False),
        ("/ending", False),
        ("ok, end meeting", True),
        ("End  Meeting.", True),
        ("weekend meetings are fun", False),
        ("time to wrap up", True),
        ("we are adjourned", True),
        ("Adjourn!", True),
        ("the end", False),
        ("", False),
    ],
)
def test_end_phrases(text: str, ends: bool) -> None:
    assert is_end_phrase(text) is ends


def test_the_open_floor_hint_is_an_end_phrase() -> None:
    assert is_end_phrase(END_PHRASE_HINT)


def test_end_signal_only_from_the_presenter() -> None:
    own = room(PRESENTER_ID, f'Post "{END_PHRASE_HINT}" when done', id="own")
    cases = {
        "presenter": (room(PRESENTER_ID, "let's wrap up"), True, True),
        "another human": (room("user-2", "let's wrap up"), False, False),
        "an agent": (room(DEV_ID, "let's wrap up"), False, False),
        "the conductor's own post": (own, False, False),
    }
    for name, (message, presents, ends) in cases.items():
        observed = to_observed(message, ROSTER, own_post_ids={"own"})
        assert (observed.is_presenter, observed.is_end_signal) == (presents, ends), name


def test_without_a_presenter_id_every_human_presents() -> None:
    roster = Roster(PM_ID, DEV_ID, ARCH_ID)
    assert to_observed(room("user-2", "adjourn"), roster).is_end_signal


@pytest.mark.parametrize(
    ("text", "mentions", "expected"),
    [
        ("over to you", (ARCH_ID,), True),
        ("over to you", ("jordan (architect)",), True),  # a handle in the mentions list
        ("@Jordan (Architect) your call", (), True),
        ("thoughts, @jordan (architect)?", (), True),
        ("Jordan (Architect) would know", (), False),
        ("@Jordan (Architect)s", (), False),
        ("@Sam (Dev) what do you think", (DEV_ID,), False),
    ],
)
def test_architect_mentions(text: str, mentions: tuple[str, ...], expected: bool) -> None:
    assert mentions_architect(room(PM_ID, text, mentions=mentions), ROSTER) is expected


def test_projection_of_one_message() -> None:
    naive = datetime(2026, 9, 1, 12, 0)  # read as UTC
    observed = to_observed(room(ARCH_ID, "Verdict: B", mentions=(PM_ID,), at=naive), ROSTER)
    assert observed.sender_class is SenderClass.ARCHITECT
    assert observed.timestamp == T0.timestamp()
    assert (observed.is_final_decision, observed.mentions_architect) == (True, False)
    assert (observed.is_presenter, observed.is_end_signal) == (False, False)
    assert to_observed(room(at=None), ROSTER).timestamp == 0.0


def test_batches_are_deduplicated_sorted_and_skip_own_posts() -> None:
    plus_two = timezone(timedelta(hours=2))
    batch = [
        room(id="late", at=T0 + timedelta(minutes=5)),
        room(id="own", at=T0),
        room(id="naive", at=datetime(2026, 9, 1, 12, 1)),
        room(id="early", at=datetime(2026, 9, 1, 13, 0, tzinfo=plus_two)),  # 11:00 UTC
        room(id="late", text="a second copy", at=T0),
        room(id="unstamped", at=None),
        room(id="tie-a", at=T0 + timedelta(minutes=2)),
        room(id="tie-b", at=T0 + timedelta(minutes=2)),
        room(id="seen", at=T0),
    ]
    fresh = select_new(batch, seen={"seen"}, own_post_ids={"own"})
    assert [m.id for m in fresh] == ["unstamped", "early", "naive", "tie-a", "tie-b", "late"]
    assert next(m for m in fresh if m.id == "late").text == "hello"  # the first copy wins


def test_projector_remembers_seen_and_own_posts() -> None:
    projector = RoomProjector(ROSTER)
    projector.note_own_post("brief")
    first = projector.project(
        [room(PRESENTER_ID, "kick-off", id="brief"), room(PM_ID, id="a"), room(DEV_ID, id="b")]
    )
    assert [o.sender_class for o in first] == [SenderClass.PM, SenderClass.DEVELOPER]
    second = projector.project([room(DEV_ID, id="b"), room(PRESENTER_ID, "/end", id="c")])
    assert [(o.is_presenter, o.is_end_signal) for o in second] == [(True, True)]
    assert projector.seen_ids == {"brief", "a", "b", "c"}
    assert projector.project([room(PM_ID, id="a")]) == []


def test_roster_rejects_ambiguous_ids() -> None:
    with pytest.raises(ValueError, match="distinct"):
        Roster(PM_ID, PM_ID, ARCH_ID)
    with pytest.raises(ValueError, match="distinct"):
        Roster(PM_ID, "", ARCH_ID)
    with pytest.raises(ValueError, match="blank"):
        Roster(PM_ID, DEV_ID, ARCH_ID, (" ",))


def chat_message(**fields: object) -> ChatMessage:
    """A real band_rest model, validated from the wire shape."""
    wire = {"id": "m1", "content": "hi", "message_type": "text", "sender_id": PM_ID}
    return ChatMessage.model_validate({"sender_type": "Agent", **wire, **fields})


def test_adapter_reads_the_band_rest_model() -> None:
    mentions = [{"id": ARCH_ID, "handle": "owner/jordan", "name": "Jordan (Architect)"}]
    model = chat_message(metadata={"mentions": mentions}, inserted_at="2026-09-01T12:00:00Z")
    assert from_band_rest(model) == RoomMessage("m1", PM_ID, "Agent", "hi", (ARCH_ID,), T0)


def test_adapter_tolerates_missing_optional_fields() -> None:
    model = ChatMessage(
        id="m2", content="", message_type="text", sender_id=PRESENTER_ID, sender_type="User"
    )
    assert from_band_rest(model) == RoomMessage("m2", PRESENTER_ID, "User", "", (), None)
    handle_only = chat_message(metadata={"mentions": [{"handle": "owner/jordan"}, "x", "x"]})
    assert from_band_rest(handle_only).mentions == ("owner/jordan", "x")


def test_adapter_reads_other_shapes() -> None:
    plain = SimpleNamespace(
        id=7, sender_id=DEV_ID, sender_type="Agent", text="yo", mentions=[ARCH_ID], created_at=T0
    )
    assert from_band_rest(plain) == RoomMessage("7", DEV_ID, "Agent", "yo", (ARCH_ID,), T0)
    raw = {"id": "m3", "sender_id": PM_ID, "content": "x", "inserted_at": "not a time"}
    assert from_band_rest(raw).created_at is None
    with pytest.raises(ValueError, match="needs an id and a sender_id"):
        from_band_rest({"content": "no id"})


def test_band_rest_messages_drive_the_breaker() -> None:
    stamps = [f"2026-09-01T12:00:0{i}Z" for i in range(4)]
    room_page = [  # newest first, as a page of history arrives
        chat_message(id="v", sender_id=ARCH_ID, content="Verdict: B", inserted_at=stamps[3]),
        chat_message(id="h", content="@Jordan (Architect) over to you", inserted_at=stamps[2]),
        chat_message(id="d", sender_id=DEV_ID, content="B is simpler", inserted_at=stamps[1]),
        chat_message(id="p", content="A or B?", inserted_at=stamps[0]),
    ]
    projector = RoomProjector(ROSTER)
    breaker = CircuitBreaker(BreakerConfig(interactive=True), start_time=0.0)
    for observed in projector.project(from_band_rest(m) for m in room_page):
        breaker.record(observed)
    assert (breaker.counted_messages, breaker.phase) == (4, "decided")
    assert breaker.poll(5.0) == [Action.OPEN_FLOOR]
