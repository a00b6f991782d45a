"""The state file: atomic 0600 writes, clean errors, and a restart that keeps everything."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from bandkit.emulator import persistence
from bandkit.emulator.errors import EmulatorError, Phase
from bandkit.emulator.server import Emulator, new_state
from tests.emulator.conftest import StartEmulator
from tests.emulator.support import (
    USER_KEY,
    add,
    create_room,
    human_client,
    mention,
    raw_client,
    register,
    seat,
)


def test_missing_state_file_means_a_fresh_start(tmp_path: Path) -> None:
    assert persistence.load(tmp_path / "absent.json") is None


@pytest.mark.parametrize(
    "content", ["{broken", '{"schema_version": "1"}', '{"schema_version": "9", "user": {}}']
)
def test_invalid_state_file_is_a_clear_state_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(EmulatorError) as caught:
        persistence.load(path)
    assert caught.value.phase is Phase.STATE
    assert str(path) in str(caught.value)
    assert "move it away" in str(caught.value)


async def test_restart_keeps_agents_keys_rooms_messages_and_delivery(
    tmp_path: Path, start_emulator: StartEmulator
) -> None:
    state_file = tmp_path / "state.json"
    first = await start_emulator(state_file=state_file)
    human = human_client(first.rest_url)
    agent = await register(human)
    room = await create_room(human, "kept")
    await add(human, room, agent.id)
    message = await mention(human, room, agent, "remember me")
    async with raw_client(first.rest_url, agent.key) as client:
        path = f"/api/v1/agent/chats/{room}/messages/{message}/processing"
        assert (await client.post(path)).status_code == 200
    await first.shutdown(2.0)
    saved = state_file.read_text()
    assert agent.key not in saved
    assert USER_KEY not in saved
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600

    second = await start_emulator(state_file=state_file)
    async with raw_client(second.rest_url, agent.key) as client:
        assert (await client.get("/api/v1/agent/me")).json()["data"]["id"] == agent.id
        nxt = await client.get(f"/api/v1/agent/chats/{room}/messages/next")
        assert nxt.json()["data"]["id"] == message
        status = nxt.json()["data"]["metadata"]["delivery_status"][agent.id]
        assert status["status"] == "processing"
        assert status["current_attempt"] == 1
        done = await client.post(f"/api/v1/agent/chats/{room}/messages/{message}/processed")
        assert done.json()["data"]["status"] == "processed"
    rooms = await human_client(second.rest_url).human_api_chats.list_my_chats()
    assert [r.title for r in rooms.data] == ["kept"]


def test_a_state_file_from_before_memories_tasks_files_and_contacts_loads(
    tmp_path: Path,
) -> None:
    old = new_state().model_dump(mode="json")
    for key in ("memories", "tasks", "boards", "files", "contact_requests", "contacts"):
        del old[key]
    path = tmp_path / "state.json"
    path.write_text(json.dumps(old))
    loaded = persistence.load(path)
    assert loaded is not None
    assert (loaded.memories, loaded.tasks, loaded.files, loaded.contacts) == ({}, {}, {}, {})


async def test_deleting_a_room_or_an_agent_takes_its_data_along(emu: Emulator) -> None:
    human = human_client(emu.rest_url)
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev")
    await pm.tools.create_task("goes with the room")
    await pm.tools.set_board(goal_title="so does the goal")
    async with raw_client(emu.rest_url, pm.agent.key) as client:
        raw = b"bytes"
        upload = await client.put(
            f"/api/v1/agent/chats/{pm.room}/files",
            content=raw,
            headers={
                "x-file-name": "a.txt",
                "x-file-sha256": hashlib.sha256(raw).hexdigest(),
                "content-type": "text/plain",
            },
        )
        assert upload.status_code == 201, upload.text
    memory = {"system": "working", "type": "semantic", "segment": "agent", "scope": "agent"}
    await pm.tools.store_memory("goes with the agent", thought="t", **memory)
    await pm.tools.add_contact("dev")
    assert emu.platform is not None
    state = emu.platform.state
    async with raw_client(emu.rest_url) as client:
        assert (await client.delete(f"/api/v1/me/chats/{pm.room}")).status_code == 204
        assert (await client.delete(f"/api/v1/me/agents/{pm.agent.id}?force=true")).is_success
    assert (state.tasks, state.boards, state.files) == ({}, {}, {})
    assert (state.memories, state.contact_requests) == ({}, {})
    assert dev.agent.id in state.agents
