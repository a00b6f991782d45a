"""Agent memories through the SDK's own memory tools (`Capability.MEMORY`) and band_rest.

Every call goes through `AgentTools` (the tool layer an adapter dispatches to), whose
Fern client validates each answer; no request may end `UNHANDLED`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from band.client.rest import AsyncRestClient
from band.core.exceptions import BandToolError
from band.runtime.tools.human import HumanTools
from band_rest import AgentMemoryCreateRequest
from band_rest.errors import ForbiddenError, NotFoundError, UnprocessableEntityError

from bandkit.emulator.server import Emulator
from tests.emulator.conftest import StartEmulator
from tests.emulator.support import (
    ROOM,
    USER_KEY,
    assert_error,
    assert_refuses_wrong_keys,
    human_client,
    raw_client,
    seat,
)

pytestmark = pytest.mark.usefixtures("no_unhandled")

MEM = "/api/v1/agent/memories"
NOTE: dict[str, Any] = {
    "content": "Ada prefers short answers",
    "system": "long_term",
    "type": "semantic",
    "segment": "user",
    "thought": "she said so twice",
    "scope": "agent",
}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", MEM),
        ("POST", MEM),
        ("GET", f"{MEM}/{ROOM}"),
        ("POST", f"{MEM}/{ROOM}/supersede"),
        ("POST", f"{MEM}/{ROOM}/archive"),
    ],
)
async def test_memory_routes_refuse_wrong_keys(emu: Emulator, method: str, path: str) -> None:
    await assert_refuses_wrong_keys(emu.rest_url, method, path, USER_KEY)


async def test_store_list_get_supersede_archive_through_the_sdk_tools(
    emu: Emulator, human: AsyncRestClient
) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    stored = await pm.tools.execute_tool_call("band_store_memory", NOTE)
    assert isinstance(stored, dict), stored  # a dict, not the tool's error string
    assert (stored["content"], stored["status"], stored["scope"]) == (
        NOTE["content"],
        "active",
        "agent",
    )
    assert stored["source_agent_id"] == pm.agent.id
    second = await pm.tools.store_memory(
        "the build uses uv",
        "working",
        "procedural",
        "tool",
        "seen in the repo",
        "subject",
        subject_id=pm.agent.id,
        metadata={"tags": ["build"]},
    )
    assert (second.scope, second.subject_id, second.metadata) == (
        "subject",
        pm.agent.id,
        {"tags": ["build"]},
    )

    listed = await pm.tools.list_memories()
    assert [m.id for m in listed.data or []] == [second.id, stored["id"]]  # newest first
    found = await pm.tools.list_memories(content_query="SHORT", segment="user")
    assert [m.id for m in found.data or []] == [stored["id"]]
    assert (await pm.tools.get_memory(second.id)).content == "the build uses uv"

    superseded = await pm.tools.execute_tool_call("band_supersede_memory", {"memory_id": second.id})
    assert superseded["status"] == "superseded"
    archived = await pm.tools.archive_memory(stored["id"])
    assert archived.status == "archived"
    assert (await pm.tools.list_memories()).data == []  # lists default to active
    every = await pm.tools.list_memories(status="all")
    assert {m.status for m in every.data or []} == {"superseded", "archived"}
    again = await pm.tools.archive_memory(stored["id"])  # idempotent
    assert again.status == "archived"


async def test_an_agent_sees_and_changes_only_its_own_memories(
    emu: Emulator, human: AsyncRestClient
) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev", room=pm.room)
    mine = await pm.tools.store_memory(**NOTE)
    for call in (dev.tools.get_memory, dev.tools.supersede_memory, dev.tools.archive_memory):
        with pytest.raises(NotFoundError):
            await call(mine.id)
    assert (await dev.tools.list_memories(status="all")).data == []
    assert (await pm.tools.get_memory(mine.id)).status == "active"


async def test_refusals_use_the_platform_shapes(emu: Emulator, human: AsyncRestClient) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    with pytest.raises(BandToolError, match='Retry with scope="agent"'):
        await pm.tools.store_memory(**{**NOTE, "scope": "organization"})
    with pytest.raises(UnprocessableEntityError):
        await pm.rest.agent_api_memories.list_agent_memories(memory_scope="org")
    with pytest.raises(UnprocessableEntityError):  # the SDK checks this pairing too
        await pm.rest.agent_api_memories.create_agent_memory(
            memory=AgentMemoryCreateRequest(**{**NOTE, "system": "sensory"})
        )
    async with raw_client(emu.rest_url, pm.agent.key) as client:
        for bad in (
            {"memory": {**NOTE, "content": " "}},
            {"memory": {**NOTE, "scope": "subject"}},  # no subject_id
            {"memory": {**NOTE, "segment": "diary"}},
            {"memory": {**NOTE, "metadata": {"tags": "x"}}},
            {"memory": "text"},
        ):
            assert_error(await client.post(MEM, json=bad), 422, "validation_error")
        mixed = await client.get(f"{MEM}?page=1&limit=5")
        assert "/cursor" in assert_error(mixed, 422, "validation_error")["details"]


async def test_cursor_and_page_paging(emu: Emulator, human: AsyncRestClient) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    ids = [(await pm.tools.store_memory(**{**NOTE, "content": f"fact {n}"})).id for n in range(5)]
    api = pm.rest.agent_api_memories
    first = await api.list_agent_memories(limit=2)
    assert first.metadata is not None
    assert first.metadata.has_more
    rest = await api.list_agent_memories(limit=10, cursor=first.metadata.next_cursor)
    seen = [m.id for m in (first.data or []) + (rest.data or [])]
    assert seen == ids[::-1]
    page = await api.list_agent_memories(page=2, page_size=2)
    assert page.metadata is not None
    assert (page.metadata.total_count, page.metadata.total_pages) == (5, 3)
    assert [m.id for m in page.data or []] == ids[::-1][2:4]


async def test_memories_survive_a_restart(start_emulator: StartEmulator, tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    first: Emulator = await start_emulator(state_file=state_file)
    pm = await seat(first.rest_url, human_client(first.rest_url), "PM")
    kept = await pm.tools.store_memory(**NOTE)
    await first.shutdown(2.0)
    second: Emulator = await start_emulator(state_file=state_file)
    rest = AsyncRestClient(api_key=pm.agent.key, base_url=second.rest_url)
    again = await rest.agent_api_memories.get_agent_memory(id=kept.id)
    assert again.data is not None
    assert again.data.content == NOTE["content"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/me/memories"),
        ("GET", f"/api/v1/me/memories/{ROOM}"),
        ("DELETE", f"/api/v1/me/memories/{ROOM}"),
        ("POST", f"/api/v1/me/memories/{ROOM}/restore"),
    ],
)
async def test_user_memory_routes_refuse_agent_keys(
    emu: Emulator, human: AsyncRestClient, method: str, path: str
) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    await assert_refuses_wrong_keys(emu.rest_url, method, path, pm.agent.key)


async def test_the_user_sees_its_agents_private_memories_and_those_about_it(
    emu: Emulator, human: AsyncRestClient
) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev", room=pm.room)
    profile = await human.human_api_profile.get_my_profile()
    private = await pm.tools.store_memory(**NOTE)
    about_user = await pm.tools.store_memory(
        **{**NOTE, "content": "the user likes tea", "scope": "subject"}, subject_id=profile.data.id
    )
    about_dev = await pm.tools.store_memory(
        **{**NOTE, "content": "dev is fast", "scope": "subject"}, subject_id=dev.agent.id
    )
    tools = HumanTools(human)
    listed = await tools.list_user_memories()
    assert [m.id for m in listed.data] == [about_user.id, private.id]
    about_me = await tools.list_user_memories(scope="about_me")
    (row,) = about_me.data
    assert (row.subject_type, row.subject_name, row.source_agent_name) == (
        "user",
        "Local User",
        "PM",
    )
    with pytest.raises(ForbiddenError):
        await tools.get_user_memory(about_dev.id)
    assert (await tools.archive_user_memory(private.id)).data.status == "archived"
    assert (await tools.restore_user_memory(private.id)).data.status == "active"
    with pytest.raises(UnprocessableEntityError):  # only an archived memory can be restored
        await tools.restore_user_memory(private.id)
    assert (await tools.supersede_user_memory(about_user.id)).data.status == "superseded"
    assert await tools.delete_user_memory(private.id) == {"deleted": True, "id": private.id}
    with pytest.raises(NotFoundError):
        await pm.tools.get_memory(private.id)
