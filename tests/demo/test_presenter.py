"""The presenter's seat: a one-time login link that lands on the meeting's room, printed to
the terminal only (the transcript file gets a note), at the room's opening and again at the
floor's; on a real platform the room page's URL alone; how to end early; the logs command."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from bandkit.demo.presenter import LINK_NOTE, Seat, logs_command
from bandkit.demo.target import PlatformKind, Target
from bandkit.demo.transcript import Transcript
from bandkit.emulator import service
from bandkit.emulator.server import Emulator
from tests.demo.fakes import USER_KEY
from tests.emulator.support import create_room, human_client, token_of


def _record(emu: Emulator, tmp_path: Path) -> service.RunRecord:
    key_file = tmp_path / "key"
    key_file.write_text(USER_KEY + "\n")
    key_file.chmod(0o600)
    return service.RunRecord(1, emu.rest_url, emu.ws_url, str(key_file), "", "", "now", None)


def _links(lines: list[str]) -> list[str]:
    return [word for line in lines for word in line.split() if "/login#token=" in word]


async def test_the_link_lands_on_the_room_and_reaches_the_terminal_only(
    emu: Emulator, tmp_path: Path
) -> None:
    room = await create_room(human_client(emu.rest_url, USER_KEY), "Design Review — seat")
    target = Target(
        PlatformKind.LOCAL, emu.rest_url, emu.ws_url, USER_KEY, "", _record(emu, tmp_path)
    )
    shown: list[str] = []
    transcript = tmp_path / "transcript.txt"
    with Transcript(transcript, shown.append, hide=(USER_KEY,)) as say:
        seat = Seat(target, say, run_dir=tmp_path / "run", idle_s=420)
        await asyncio.to_thread(seat.room_open, room, f"{emu.rest_url}/rooms/{room}")
        await asyncio.to_thread(seat.floor_open)
    links = _links(shown)
    assert len(links) == 2
    assert links[0] != links[1]
    kept = transcript.read_text()
    assert kept.count(LINK_NOTE) == 2
    for link in links:
        assert link.startswith(f"{emu.rest_url}/login#token=")
        assert link.endswith(f"&next=/rooms/{room}")
        assert token_of(link) not in kept
    said = "\n".join(shown)
    assert "end meeting" in said
    assert "Ctrl-C" in said
    assert "420 s" in said
    assert f"uv run invoke demo.logs --follow --run-dir {tmp_path / 'run'}" in said
    assert USER_KEY not in said + kept
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:
        form = {"token": token_of(links[1]), "next": links[1].rsplit("next=", 1)[1]}
        signed = await client.post("/login", data=form)
    assert signed.status_code == 303
    assert signed.headers["location"] == f"/rooms/{room}"


def test_on_a_real_platform_the_room_url_alone(tmp_path: Path) -> None:
    url = "https://band.example/chat/room-1"
    target = Target(PlatformKind.REAL, "https://band.example", "wss://x", "real-key", "")
    shown: list[str] = []
    with Transcript(tmp_path / "t.txt", shown.append) as say:
        seat = Seat(target, say, run_dir=tmp_path, idle_s=60)
        seat.room_open("room-1", url)
        seat.floor_open()
    assert not _links(shown)
    assert sum(url in line for line in shown) == 2
    assert (tmp_path / "t.txt").read_text().splitlines() == shown


def test_an_unreachable_emulator_is_said_and_not_fatal(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("k\n")
    record = service.RunRecord(1, "http://127.0.0.1:9", "ws://x", str(key_file), "", "", "", None)
    target = Target(PlatformKind.LOCAL, record.rest_url, "ws://x", "k", "", record)
    shown: list[str] = []
    with Transcript(tmp_path / "t.txt", shown.append) as say:
        Seat(target, say, run_dir=tmp_path, idle_s=60).room_open("r", "http://127.0.0.1:9/rooms/r")
    assert "no login link" in shown[0]
    assert "platform.status" in shown[0]


def test_the_logs_command_names_the_run_dir_unless_it_is_the_default(tmp_path: Path) -> None:
    assert logs_command(service.RUN_DIR.absolute()) == "uv run invoke demo.logs --follow"
    odd = tmp_path / "a dir"
    assert logs_command(odd) == f"uv run invoke demo.logs --follow --run-dir '{odd}'"
