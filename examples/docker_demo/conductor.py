"""The host-side conductor: sets the meeting up, follows the room, runs the circuit breaker.

Flow (``Conductor.run``):

1. create the room "Design Review — <topic> — <YYYY-MM-DD HH:MM>" (the ``ledger`` records
   it before it exists and learns its id after), add the PM and the developer, print the
   room page URL, and tell ``on_room`` (the caller shows the presenter the way in);
2. start following the room (``observer.RoomFeed``: WebSocket pushes, polling when the
   socket is down), then brief the PM alone (the only opening: the brief mentions her);
3. until the breaker stops: wait for a push or a tick, read the room, project every new
   message (``projection``), feed it to the breaker and print a transcript line; confirm
   the architect once he is a participant; post the scenario's presenter cues when due;
   then ``poll(time.monotonic())`` and carry out the actions in order:

   * NUDGE_HANDOFF: ask the PM (mentioned) to bring in the architect;
   * ADD_ARCHITECT: list the participants first, add the architect only if absent, then
     ask him (mentioned) to rule;
   * OPEN_FLOOR: invite the presenter (lines typed in this terminal are posted as the
     presenter when it is a TTY; what the presenter posts in the room counts alike), then
     tell ``on_floor``;
   * HARD_KILL / TERMINATE_OK: post the closer and stop.

The conductor posts with the presenter's key; it tracks its own posts so they never count
as the presenter's. The result says how the meeting stopped; the caller maps that to an
exit code and tears everything down.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

from examples.docker_demo import speech
from examples.docker_demo.breaker import (
    COUNTED_SENDERS,
    Action,
    BreakerConfig,
    CircuitBreaker,
    SenderClass,
    StopCause,
)
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.observer import POLL_INTERVAL_S, RoomFeed
from examples.docker_demo.projection import USER_SENDER_TYPE, RoomMessage, RoomProjector, Roster
from examples.docker_demo.room import Participant, RoomCallError, RoomClient
from examples.docker_demo.scenario import PresenterCue

TICK_S: Final = 0.25  # breaker poll cadence; a push wakes the loop sooner
SAFETY_READ_S: Final = 5.0  # while pushes flow, read anyway this often (a lost push)
DEFAULT_UI_TEMPLATE: Final = "{rest_url}/rooms/{chat_id}"  # the local emulator's room page


class RoomLedger(Protocol):
    """Where the room is recorded before it exists (the run manifest)."""

    def before_room(self, title: str) -> None: ...
    def room_created(self, title: str, room_id: str) -> None: ...


@dataclass(frozen=True)
class MeetingSetup:
    rest_url: str
    ws_url: str
    user_key: str = field(repr=False)
    topic: str
    agent_ids: Mapping[Role, str]
    breaker: BreakerConfig
    ui_url_template: str = DEFAULT_UI_TEMPLATE  # {chat_id} and {rest_url} are filled in
    presenter_cues: tuple[PresenterCue, ...] = ()
    poll_interval_s: float = POLL_INTERVAL_S


@dataclass
class MeetingResult:
    room_id: str = ""
    room_url: str = ""
    stop_cause: StopCause | None = None
    stop_reason: str = ""
    verdict_reached: bool = False
    verdict: str = ""
    messages: int = 0  # agent messages seen
    started_at: float = 0.0  # conductor clock when the brief went out
    verdict_at: float | None = None  # conductor clock when the verdict was seen
    observer_drops: int = 0


class Conductor:
    def __init__(
        self,
        setup: MeetingSetup,
        *,
        ledger: RoomLedger,
        log: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = datetime.now,
        feed_factory: Callable[..., RoomFeed] = RoomFeed,
        interactive_input: bool | None = None,
        on_verdict: Callable[[], None] = lambda: None,
        on_room: Callable[[str, str], None] = lambda _room_id, _room_url: None,
        on_floor: Callable[[], None] = lambda: None,
    ) -> None:
        self.setup = setup
        self._ledger, self._log, self._clock, self._wall = ledger, log, clock, wall
        self._feed_factory, self._on_verdict = feed_factory, on_verdict
        self._on_room, self._on_floor = on_room, on_floor
        self._typing = sys.stdin.isatty() if interactive_input is None else interactive_input
        self.people = {role: Participant(setup.agent_ids[role], CAST[role].name) for role in Role}
        self._names: dict[str, str] = {p.id: p.name for p in self.people.values()}
        self.result = MeetingResult()
        self._projector = RoomProjector(
            Roster(
                setup.agent_ids[Role.PM],
                setup.agent_ids[Role.DEV],
                setup.agent_ids[Role.ARCHITECT],
                (CAST[Role.ARCHITECT].name,),
            )
        )
        self._breaker = CircuitBreaker(setup.breaker, start_time=0.0)
        self._architect_known = False
        self._read_failing = False
        self._cues = list(setup.presenter_cues)
        self._lines: asyncio.Queue[str] = asyncio.Queue()

    # -- the run
    async def run(self) -> MeetingResult:
        client = RoomClient(self.setup.rest_url, self.setup.user_key)
        try:
            await self._run(client)
        finally:
            await client.aclose()
        return self.result

    async def _run(self, client: RoomClient) -> None:
        title = speech.room_title(self.setup.topic, self._wall())
        self._ledger.before_room(title)
        room = await client.create(title)
        self._ledger.room_created(title, room)
        self.result.room_id = room
        self.result.room_url = self.setup.ui_url_template.format(
            chat_id=room, rest_url=self.setup.rest_url.rstrip("/")
        )
        self._log(f"conductor: room “{title}”")
        self._log(f"conductor: room page {self.result.room_url}")
        self._on_room(room, self.result.room_url)
        for role in (Role.PM, Role.DEV):
            await client.add(room, self.people[role].id)
        for person in await client.participants(room):
            if person.type == USER_SENDER_TYPE:  # the presenter's key: lines "for the room"
                self._names.setdefault(person.id, "presenter")
        feed = self._feed_factory(
            self.setup.ws_url,
            self.setup.user_key,
            room,
            log=self._log,
            poll_interval_s=self.setup.poll_interval_s,
        )
        await feed.start()
        try:
            await self._meet(client, room, feed)
        finally:
            self.result.observer_drops = feed.drops
            await feed.close()

    async def _meet(self, client: RoomClient, room: str, feed: RoomFeed) -> None:
        self.result.started_at = self._clock()
        self._breaker = CircuitBreaker(self.setup.breaker, start_time=self.result.started_at)
        await self._say(client, room, speech.brief(self.setup.topic), Role.PM)
        last_read = -SAFETY_READ_S
        with self._breaker as breaker:
            while not breaker.stopped:
                due = await feed.wait(TICK_S)
                while not self._lines.empty():
                    await self._presenter_says(client, room, self._lines.get_nowait())
                    due = True
                if due or self._clock() - last_read >= SAFETY_READ_S:
                    last_read = self._clock()
                    await self._refresh(client, room, feed)
                for action in breaker.poll(self._clock()):
                    await self._act(action, client, room)
                    feed.poke()
            self.result.stop_cause = breaker.stop_cause
            self.result.stop_reason = breaker.stop_reason or ""
            self.result.verdict_reached = breaker.verdict_reached

    # -- reading the room
    async def _refresh(self, client: RoomClient, room: str, feed: RoomFeed) -> None:
        try:
            batch = await client.recent(room)
        except RoomCallError as exc:
            if not self._read_failing:  # said once, not at every tick
                self._log(f"conductor: {exc}; reading again at every tick until it works")
            self._read_failing = True
            return
        if self._read_failing:
            self._read_failing = False
            self._log("conductor: reading the room works again")
        pairs = self._projector.project_pairs(batch)
        for message, observed in pairs:
            self._breaker.record(observed)
            if observed.sender_class in COUNTED_SENDERS:
                self.result.messages += 1
            first = observed.is_final_decision and self.result.verdict_at is None
            if first:
                self.result.verdict_at, self.result.verdict = self._clock(), message.text
            speaker = self._speaker(message, observed.sender_class)
            self._print(message, speaker, full=observed.is_final_decision)
            if first:
                self._on_verdict()  # after its line: the verdict is on the transcript first
        if pairs and not self._architect_known:
            await self._check_architect(client, room)
        await self._cue_presenter(client, room, feed)

    async def _check_architect(self, client: RoomClient, room: str) -> None:
        try:
            present = {p.id for p in await client.participants(room)}
        except RoomCallError as exc:
            self._log(f"conductor: {exc}")
            return
        if self.people[Role.ARCHITECT].id in present:
            self._architect_known = True
            self._breaker.note_architect_present()
            self._log(f"conductor: {self.people[Role.ARCHITECT].name} is in the room")

    async def _cue_presenter(self, client: RoomClient, room: str, feed: RoomFeed) -> None:
        while self._cues and self.result.messages >= self._cues[0].after_messages:
            await self._presenter_says(client, room, self._cues.pop(0).say)
            feed.poke()

    # -- acting
    async def _act(self, action: Action, client: RoomClient, room: str) -> None:
        match action:
            case Action.NUDGE_HANDOFF:
                self._log("conductor: soft cap reached without a handoff: nudging the PM")
                await self._say(client, room, speech.nudge(self._breaker.design_messages), Role.PM)
            case Action.ADD_ARCHITECT:
                await self._add_architect(client, room)
            case Action.OPEN_FLOOR:
                self._log("conductor: verdict in; the floor is open")
                idle = self.setup.breaker.open_floor_idle_s
                await self._say(client, room, speech.open_floor(idle, typing_here=self._typing))
                self._on_floor()
                if self._typing:
                    self._read_terminal()
            case Action.HARD_KILL | Action.TERMINATE_OK:
                reason = self._breaker.stop_reason or "stopped"
                self._log(f"conductor: {action.value}: {reason}")
                text = speech.closer(reason, hard=action is Action.HARD_KILL)
                await self._say(client, room, text)

    async def _add_architect(self, client: RoomClient, room: str) -> None:
        architect = self.people[Role.ARCHITECT]
        present = {p.id for p in await client.participants(room)}
        if architect.id in present:
            self._log(f"conductor: {architect.name} is already in the room; not adding")
        else:
            self._log(f"conductor: handoff deadline passed: adding {architect.name}")
            await client.add(room, architect.id)
        self._architect_known = True
        self._breaker.note_architect_present()
        await self._say(client, room, speech.add_note(), Role.ARCHITECT)

    async def _say(self, client: RoomClient, room: str, text: str, to: Role | None = None) -> None:
        mentions = [self.people[to]] if to is not None else []
        message_id = await client.post(room, text, mentions)
        self._projector.note_own_post(message_id)
        self._print_line("conductor", [m.name for m in mentions], text)

    async def _presenter_says(self, client: RoomClient, room: str, text: str) -> None:
        """Post as the presenter (not noted as the conductor's own: the breaker sees it)."""
        mentions = [p for p in self.people.values() if f"@{p.name.split()[0]}" in text]
        try:
            await client.post(room, text, mentions)
        except RoomCallError as exc:
            self._log(f"conductor: the presenter's line was not posted: {exc}")

    def _read_terminal(self) -> None:
        loop = asyncio.get_running_loop()

        def pump() -> None:
            for line in sys.stdin:
                if line.strip():
                    loop.call_soon_threadsafe(self._lines.put_nowait, line.strip())

        threading.Thread(target=pump, name="presenter-input", daemon=True).start()

    # -- the transcript
    def _speaker(self, message: RoomMessage, sender: SenderClass) -> str:
        if sender is SenderClass.HUMAN:
            return "presenter"
        return self._names.get(message.sender_id, f"unknown sender {message.sender_id[:8]}")

    def _print(self, message: RoomMessage, speaker: str, *, full: bool = False) -> None:
        to = [self._names.get(m, m) for m in message.mentions]
        self._print_line(speaker, to, message.text, full=full)

    def _print_line(self, speaker: str, to: list[str], text: str, *, full: bool = False) -> None:
        elapsed = self._clock() - self.result.started_at if self.result.started_at else 0.0
        cb = self._breaker
        state = f"{cb.phase.value} {cb.counted_messages}/{self.setup.breaker.hard_cap}"
        self._log(speech.transcript_line(elapsed, speaker, to, text, state, full=full))
