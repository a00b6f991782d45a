"""The conductor against an in-process emulator, the agents played by the test through the
agent API: the room and its brief, the nudge, the idempotent fallback add, the verdict's
grace, the hard cap, a scripted presenter, and a WebSocket drop mid-meeting (polling)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime

import pytest

from bandkit.emulator.server import Emulator
from examples.docker_demo.breaker import BreakerConfig, StopCause
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.conductor import Conductor, MeetingResult, MeetingSetup
from examples.docker_demo.room import RoomClient
from examples.docker_demo.scenario import PresenterCue
from tests.demo.fakes import USER_KEY, Ledger, Played, register_cast, say
from tests.support.wait import until

SMALL = BreakerConfig(soft_cap=2, handoff_deadline=1, hard_cap=6, wall_clock_s=30.0, grace_s=0.2)
WHEN = datetime(2026, 9, 1, 14, 5)


class Meeting:
    """A conductor running in the background, and what it printed."""

    def __init__(self, emu: Emulator, cast: dict[Role, Played], **changes: object) -> None:
        setup = MeetingSetup(
            rest_url=emu.rest_url,
            ws_url=emu.ws_url,
            user_key=USER_KEY,
            topic="the topic",
            agent_ids={role: agent.id for role, agent in cast.items()},
            breaker=SMALL,
            poll_interval_s=0.2,
        )
        self.ledger = Ledger()
        self.lines: list[str] = []
        self.conductor = Conductor(
            dataclasses.replace(setup, **changes),  # type: ignore[arg-type]
            ledger=self.ledger,
            log=self.lines.append,
            wall=lambda: WHEN,
            interactive_input=False,
        )
        self.task: asyncio.Task[MeetingResult] = asyncio.create_task(self.conductor.run())

    async def room(self) -> str:
        await until(lambda: bool(self.ledger.room) and self.said("Welcome"), what="the brief")
        return self.ledger.room

    def said(self, fragment: str) -> bool:
        return any(fragment in line for line in self.lines)

    async def result(self) -> MeetingResult:
        return await asyncio.wait_for(self.task, 20)


async def messages(emu: Emulator, room: str) -> list[tuple[str, str, list[str]]]:
    client = RoomClient(emu.rest_url, USER_KEY)
    try:
        found = await client.recent(room)
    finally:
        await client.aclose()
    return [(m.sender_id, m.text, list(m.mentions)) for m in found]


async def participants(emu: Emulator, room: str) -> set[str]:
    client = RoomClient(emu.rest_url, USER_KEY)
    try:
        return {p.id for p in await client.participants(room)}
    finally:
        await client.aclose()


async def test_the_room_the_brief_and_a_handoff_to_a_verdict(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    pm, dev, arch = cast[Role.PM], cast[Role.DEV], cast[Role.ARCHITECT]
    meeting = Meeting(emu, cast)
    room = await meeting.room()
    assert meeting.ledger.titles == ["Design Review — the topic — 2026-09-01 14:05"]
    assert await participants(emu, room) >= {pm.id, dev.id}
    assert arch.id not in await participants(emu, room)
    brief = (await messages(emu, room))[0]
    assert brief[2] == [pm.id]  # the brief goes to the PM alone
    await say(emu.rest_url, pm, room, "@Sam what does it cost?", dev)
    human = RoomClient(emu.rest_url, USER_KEY)
    await human.add(room, arch.id)  # as the PM's add_participant tool would
    await human.aclose()
    await say(emu.rest_url, pm, room, "@Jordan your call?", arch)
    await until(lambda: meeting.said("Jordan (Architect) is in the room"), what="presence")
    await say(emu.rest_url, arch, room, "VERDICT: one sandbox per agent.", pm, dev)
    result = await meeting.result()
    assert (result.stop_cause, result.verdict_reached) == (StopCause.GRACE, True)
    assert result.verdict == "VERDICT: one sandbox per agent."
    assert result.verdict_at is not None
    assert not meeting.said("nudging")
    assert meeting.said("Meeting closed: decided")
    assert result.room_url == f"{emu.rest_url}/rooms/{room}"
    assert any("Maya (PM) → Sam (Dev): @Sam what does it cost?" in line for line in meeting.lines)


async def test_no_handoff_nudges_then_adds_the_architect_once(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    pm, dev, arch = cast[Role.PM], cast[Role.DEV], cast[Role.ARCHITECT]
    meeting = Meeting(emu, cast)
    room = await meeting.room()
    await say(emu.rest_url, pm, room, "one", dev)
    await say(emu.rest_url, dev, room, "two", pm)
    await until(lambda: meeting.said("nudging the PM"), what="the nudge")
    nudge = [m for m in await messages(emu, room) if "Time for the final call" in m[1]]
    assert len(nudge) == 1
    assert nudge[0][2] == [pm.id]
    await say(emu.rest_url, pm, room, "three", dev)
    await until(lambda: meeting.said("adding Jordan (Architect)"), what="the fallback add")
    assert arch.id in await participants(emu, room)
    note = [m for m in await messages(emu, room) if "The conductor added you" in m[1]]
    assert [m[2] for m in note] == [[arch.id]]
    await say(emu.rest_url, arch, room, "Decision: ship it.", pm)
    result = await meeting.result()
    assert result.verdict_reached
    assert sum("nudging" in line for line in meeting.lines) == 1


async def test_the_fallback_add_checks_the_participants_first(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    meeting = Meeting(emu, cast)
    room = await meeting.room()
    client = RoomClient(emu.rest_url, USER_KEY)
    try:
        await client.add(room, cast[Role.ARCHITECT].id)
        await meeting.conductor._add_architect(client, room)  # the breaker's ADD, again
    finally:
        await client.aclose()
    assert meeting.said("already in the room; not adding")
    meeting.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await meeting.task


async def test_an_undecided_meeting_is_hard_killed_on_the_cap(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    pm, dev, arch = cast[Role.PM], cast[Role.DEV], cast[Role.ARCHITECT]
    meeting = Meeting(emu, cast)
    room = await meeting.room()
    client = RoomClient(emu.rest_url, USER_KEY)
    await client.add(room, arch.id)
    await client.aclose()
    speakers = [(pm, arch), (arch, dev), (dev, pm)] * 2
    for speaker, to in speakers:
        await say(emu.rest_url, speaker, room, "one more question", to)
    result = await meeting.result()
    assert (result.stop_cause, result.verdict_reached) == (StopCause.HARD_CAP, False)
    assert meeting.said("Meeting stopped by the circuit breaker: hard cap of 6 messages")


async def test_a_scripted_presenter_ends_the_meeting(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    pm, dev = cast[Role.PM], cast[Role.DEV]
    cue = PresenterCue(after_messages=2, say="Thanks, let's wrap up. end meeting")
    meeting = Meeting(emu, cast, presenter_cues=(cue,))
    room = await meeting.room()
    await say(emu.rest_url, pm, room, "one", dev)
    await say(emu.rest_url, dev, room, "two", pm)
    result = await meeting.result()
    assert result.stop_cause is StopCause.PRESENTER_END
    assert not result.verdict_reached
    assert meeting.said("presenter: Thanks, let's wrap up. end meeting")


async def test_a_dropped_websocket_falls_back_to_polling_and_says_so(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    pm, dev, arch = cast[Role.PM], cast[Role.DEV], cast[Role.ARCHITECT]
    meeting = Meeting(emu, cast, breaker=dataclasses.replace(SMALL, soft_cap=20, hard_cap=30))
    room = await meeting.room()
    assert meeting.said("following the room over the WebSocket")
    assert emu.drop_sockets() >= 1
    await until(
        lambda: meeting.said("WebSocket dropped; polling the room every 0.2 s"), what="the fallback"
    )
    await say(emu.rest_url, pm, room, "while the socket is down", dev)
    await until(lambda: meeting.said("while the socket is down"), what="a polled message")
    await until(lambda: meeting.said("WebSocket back"), timeout=20, what="the reconnect")
    client = RoomClient(emu.rest_url, USER_KEY)
    await client.add(room, arch.id)
    await client.aclose()
    await say(emu.rest_url, arch, room, "VERDICT: fine.", pm)
    result = await meeting.result()
    assert result.verdict_reached
    assert result.observer_drops == 1
    assert CAST[Role.PM].name in "\n".join(meeting.lines)


async def test_interactive_opens_the_floor_and_the_presenter_closes_it(emu: Emulator) -> None:
    cast = await register_cast(emu.rest_url)
    pm, arch = cast[Role.PM], cast[Role.ARCHITECT]
    live = dataclasses.replace(SMALL, interactive=True, open_floor_idle_s=20.0)
    meeting = Meeting(emu, cast, breaker=live)
    room = await meeting.room()
    client = RoomClient(emu.rest_url, USER_KEY)
    await client.add(room, arch.id)
    await client.aclose()
    long_verdict = "VERDICT: " + "one sandbox per agent, keys on the host; " * 10
    await say(emu.rest_url, arch, room, long_verdict, pm)
    await until(lambda: meeting.said("the floor is open"), what="the open floor")
    assert meeting.said(" ".join(long_verdict.split()))  # the verdict is shown whole
    meeting.conductor._lines.put_nowait("@Maya thanks all, end meeting")  # typed in the terminal
    result = await meeting.result()
    assert (result.stop_cause, result.verdict_reached) == (StopCause.PRESENTER_END, True)
    presenter = [m for m in await messages(emu, room) if m[1].startswith("@Maya thanks")]
    assert [m[2] for m in presenter] == [[pm.id]]
