"""The scripted brain: a deterministic band-sdk adapter that follows one role's script.

The demo stages this file verbatim into each role's workspace copy (beside
``agent_main.py`` as ``main.py``) and it runs inside the sandbox with the workspace's own locked
venv: it imports only the standard library and, lazily, band-sdk.

The script is ``script.json`` beside it, written by the demo's staging from a scenario
file (see ``scenario.agent_script``). Per room, ``Cursor`` picks the next line: every
message from a peer, and the first message from a human (the brief), takes the next turn;
later human messages, and a human's once the turns are used up (the presenter asking on
the open floor), get the ``on_human`` line (or nothing). Out of turns: ``silent``
answers nothing (``no_reply``), ``repeat`` starts again at ``repeat_from``.

Playing a line uses the real Band tools, so the platform sees a real meeting's traffic:
``lookup_peers`` to find a peer by name, ``add_participant`` to bring it into the room,
then ``send_message`` with the mentions (the platform delivers a message only to the
agents it mentions, so mentions decide who speaks next). Every message needs a mention:
a line that names nobody is addressed to the room's humans (the presenter), which wakes
no agent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from band.core.protocols import AgentToolsProtocol
    from band.core.simple_adapter import SimpleAdapter
    from band.core.types import PlatformMessage

SCRIPT_FILE = "script.json"
SCRIPT_SCHEMA = 1
HUMAN_SENDER_TYPE = "User"
PEER_PAGE_SIZE = 100
MAX_PEER_PAGES = 20

logger = logging.getLogger("demo-agent")


class BrainScriptError(Exception):
    """script.json is missing or malformed; the message says what to do."""


@dataclass(frozen=True)
class Line:
    say: str
    mention: tuple[str, ...] = ()
    look_up: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    delay_s: float = 0.0

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Line:
        return cls(
            say=str(raw["say"]),
            mention=tuple(str(n) for n in raw.get("mention", ())),
            look_up=tuple(str(n) for n in raw.get("look_up", ())),
            add=tuple(str(n) for n in raw.get("add", ())),
            delay_s=float(raw.get("delay_s", 0.0)),
        )

    def text(self) -> str:
        """The message text: ``@Name`` for each mention, then what is said."""
        return " ".join([*(f"@{name}" for name in self.mention), self.say])


@dataclass(frozen=True)
class Script:
    role: str
    name: str
    turns: tuple[Line, ...]
    after: str = "silent"
    repeat_from: int = 0
    on_human: Line | None = None

    @classmethod
    def load(cls, path: Path) -> Script:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BrainScriptError(
                f"no {path.name} in {path.parent}: the demo stages one into a copy of this "
                "workspace (`uv run invoke demo.up`)"
            ) from None
        except (OSError, ValueError) as exc:
            raise BrainScriptError(f"cannot read {path}: {exc}") from None
        return cls.parse(raw, shown=str(path))

    @classmethod
    def parse(cls, raw: Any, *, shown: str = SCRIPT_FILE) -> Script:
        try:
            if raw["schema"] != SCRIPT_SCHEMA or raw["after"] not in ("silent", "repeat"):
                raise ValueError("unsupported schema or after")
            human = raw.get("on_human")
            return cls(
                role=str(raw["role"]),
                name=str(raw["name"]),
                turns=tuple(Line.parse(turn) for turn in raw["turns"]),
                after=str(raw["after"]),
                repeat_from=int(raw.get("repeat_from", 0)),
                on_human=None if human is None else Line.parse(human),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BrainScriptError(
                f"{shown} is not a schema {SCRIPT_SCHEMA} script: {exc}"
            ) from None


class Cursor:
    """Which line comes next in one room. Pure: the adapter keeps one per room."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._next = 0
        self._heard_human = False

    def next_line(self, *, from_human: bool) -> Line | None:
        """The line answering one incoming message, or None for no reply."""
        turns = self.script.turns
        if from_human and (self._heard_human or not self._turn_left()):
            self._heard_human = True  # the presenter asking after the script ran out
            return self.script.on_human
        self._heard_human = self._heard_human or from_human
        if self._next >= len(turns):
            if self.script.after != "repeat" or not turns:
                return None
            self._next = self.script.repeat_from
        line = turns[self._next]
        self._next += 1
        return line

    def _turn_left(self) -> bool:
        turns = self.script.turns
        return self._next < len(turns) or (self.script.after == "repeat" and bool(turns))


async def look_up(tools: AgentToolsProtocol, name: str) -> str | None:
    """The id of the peer called ``name``, paging the peers tool; None when absent."""
    for page in range(1, MAX_PEER_PAGES + 1):
        response = await tools.lookup_peers(page=page, page_size=PEER_PAGE_SIZE)
        peers = list(getattr(response, "data", None) or [])
        for peer in peers:
            if getattr(peer, "name", None) == name:
                return str(peer.id)
        if len(peers) < PEER_PAGE_SIZE:
            break
    return None


async def play(line: Line, tools: AgentToolsProtocol) -> None:
    """Think, use the tools the line names, then post it with its mentions."""
    if line.delay_s:
        await asyncio.sleep(line.delay_s)
    for name in line.look_up:
        found = await look_up(tools, name)
        logger.info("peers tool: %s is %s", name, found or "not among the peers")
    for name in line.add:
        added = await tools.add_participant(name)
        logger.info("added %s to the room (%s)", name, added.get("status", "?"))
    mentions = list(line.mention) or await humans(tools)
    if not mentions:
        await tools.no_reply("a line for the room, and no human in it")
        return
    await tools.send_message(line.text(), mentions=mentions)


async def humans(tools: AgentToolsProtocol) -> list[str]:
    """The ids of the room's human participants (the presenter)."""
    people = await tools.get_participants()
    return [str(p.id) for p in people if str(getattr(p, "type", "")) == HUMAN_SENDER_TYPE]


def build_adapter(
    script: Script, *, player: Callable[[Line, Any], Any] = play
) -> SimpleAdapter[object]:
    """A band-sdk ``SimpleAdapter`` that answers each message with the script's next line."""
    from band.core.simple_adapter import SimpleAdapter

    class ScriptedAdapter(SimpleAdapter[object]):
        def __init__(self) -> None:
            super().__init__()
            self.cursors: dict[str, Cursor] = {}

        async def on_message(
            self,
            msg: PlatformMessage,
            tools: AgentToolsProtocol,
            history: object,
            participants_msg: str | None,
            contacts_msg: str | None,
            *,
            is_session_bootstrap: bool,
            room_id: str,
        ) -> None:
            cursor = self.cursors.setdefault(room_id, Cursor(script))
            line = cursor.next_line(from_human=msg.sender_type == HUMAN_SENDER_TYPE)
            logger.info("message in room %s from %s", room_id, msg.sender_name or msg.sender_id)
            if line is None:
                await tools.no_reply("the script has nothing more to say")
                return
            await player(line, tools)

    return ScriptedAdapter()
