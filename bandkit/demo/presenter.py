"""The presenter's seat: how the person at the terminal joins the meeting and follows it.

When the room opens, and again when the floor opens after the verdict, `demo.up` tells the
presenter how to get in and how to end early:

* on the local platform, a fresh one-time login link that lands on the meeting's room
  page (`service.mint_login`, `next=/rooms/<id>`; the page answers 401 without a login).
  The link is a credential while unused, so it goes to the terminal only
  (`Transcript.terminal_only`): the transcript file gets a note in its place, and the
  manifest, the run record and every log never see it;
* on a real Band platform, the room page's URL (its own sign-in), as the conductor prints it;
* the command that follows the three sandboxes' logs from another terminal
  (`demo.logs --follow`), and the two ways to end early: "end meeting" in the room, or
  Ctrl-C in this terminal (which tears everything down).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Final

from bandkit.demo.target import Target
from bandkit.demo.transcript import Transcript
from bandkit.emulator import service
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.projection import END_PHRASE_HINT

PREFIX: Final = "demo.up: "
LINK_NOTE: Final = (
    PREFIX + "presenter: a one-time login link to the room page was printed to the terminal "
    "(not kept here)"
)
ARCHITECT: Final = CAST[Role.ARCHITECT].name


def logs_command(run_dir: Path) -> str:
    """`uv run invoke demo.logs --follow`, with `--run-dir` when not the default `.run`."""
    command = "uv run invoke demo.logs --follow"
    if Path(run_dir).absolute() != service.RUN_DIR.absolute():
        command += f" --run-dir {shlex.quote(str(run_dir))}"
    return command


class Seat:
    """What the presenter hears at the two moments the conductor reports (`on_room`,
    `on_floor`)."""

    def __init__(self, target: Target, say: Transcript, *, run_dir: Path, idle_s: float) -> None:
        self._target, self._say, self._idle_s = target, say, idle_s
        self._logs = logs_command(run_dir)
        self._room_id = ""
        self._room_url = ""

    def room_open(self, room_id: str, room_url: str) -> None:
        self._room_id, self._room_url = room_id, room_url
        self._way_in("watch and post in the room")
        self._say(f"{PREFIX}follow the three agents' logs from another terminal: {self._logs}")
        self._say(self._ending())

    def floor_open(self) -> None:
        self._way_in(f"the floor is yours: ask the agents anything (e.g. @{ARCHITECT} ...)")
        self._say(
            self._ending() + f"; the floor closes after {self._idle_s:g} s without a word from you"
        )

    def _way_in(self, what: str) -> None:
        record = self._target.record
        if not self._target.local or record is None:
            self._say(f"{PREFIX}{what}: {self._room_url} (sign in to the platform there)")
            return
        try:
            link, minutes = service.mint_login(record, lands=f"/rooms/{self._room_id}")
        except service.PlatformError as exc:
            self._say(
                f"{PREFIX}{what}: {self._room_url} (no login link: {exc}; "
                "`uv run invoke platform.status` prints one)"
            )
            return
        self._say.terminal_only(
            f"{PREFIX}{what}: {link} (a login link to the room page: it works once, within "
            f"{minutes} min; printed here only)",
            LINK_NOTE,
        )

    @staticmethod
    def _ending() -> str:
        return (
            f"{PREFIX}end it early: post “{END_PHRASE_HINT}” in the room, or press Ctrl-C "
            "here (which tears everything down)"
        )
