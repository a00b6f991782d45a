"""Contacts, memories and shared tasks: empty, in the exact shapes the SDK's tools parse.

Each read goes through `band.runtime.tools.AgentTools`, whose Fern client validates the
response model; writes are still unimplemented, answer 404 and are logged once.
"""

from __future__ import annotations

import logging

import pytest
from band.client.rest import AsyncRestClient
from band.runtime.tools import AgentTools
from band_rest.errors import NotFoundError

from bandkit.emulator.server import Emulator
from tests.emulator.support import USER_KEY, add, create_room, raw_client, register
from tests.emulator.test_rest_human import ROOM, assert_error

ROUTES = [
    "/api/v1/agent/contacts",
    "/api/v1/agent/contacts/requests",
    "/api/v1/agent/memories",
    f"/api/v1/agent/memories/{ROOM}",
    f"/api/v1/agent/chats/{ROOM}/tasks",
    f"/api/v1/agent/chats/{ROOM}/tasks/{ROOM}",
    f"/api/v1/agent/chats/{ROOM}/tasks/{ROOM}/history",
]


@pytest.mark.parametrize("path", ROUTES)
async def test_every_route_refuses_missing_invalid_and_user_keys(emu: Emulator, path: str) -> None:
    for key, status, code in (
        (None, 401, "unauthorized"),
        ("not-a-key", 401, "unauthorized"),
        (USER_KEY, 403, "forbidden"),
    ):
        async with raw_client(emu.rest_url, key) as client:
            assert_error(await client.get(path), status, code)


async def _tools(emu: Emulator, human: AsyncRestClient) -> tuple[AgentTools, str]:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    rest = AsyncRestClient(api_key=agent.key, base_url=emu.rest_url)
    return AgentTools(room, rest, agent_id=agent.id), agent.key


async def test_contacts_and_requests_are_empty(emu: Emulator, human: AsyncRestClient) -> None:
    tools, key = await _tools(emu, human)
    listed = await tools.list_contacts(page=2, page_size=10)
    assert listed.data == []
    assert listed.metadata is not None
    assert (listed.metadata.page, listed.metadata.page_size) == (2, 10)
    assert listed.metadata.total_count == 0
    requests = await tools.list_contact_requests()
    assert requests.data is not None
    assert (requests.data.received, requests.data.sent) == ([], [])
    assert requests.metadata is not None
    assert requests.metadata.received.total == 0
    async with raw_client(emu.rest_url, key) as client:
        bad = await client.get("/api/v1/agent/contacts/requests?sent_status=maybe")
        assert "/sent_status" in assert_error(bad, 422, "validation_error")["details"]


async def test_memories_are_empty_and_none_exists(emu: Emulator, human: AsyncRestClient) -> None:
    tools, _ = await _tools(emu, human)
    listed = await tools.list_memories(scope="subject", page_size=20)
    assert listed.data == []
    assert listed.metadata is not None
    assert (listed.metadata.has_more, listed.metadata.total_count) == (False, 0)
    with pytest.raises(NotFoundError):
        await tools.get_memory(ROOM)


async def test_room_tasks_are_empty_and_hidden_outside_the_room(
    emu: Emulator, human: AsyncRestClient
) -> None:
    tools, key = await _tools(emu, human)
    listed = await tools.list_tasks(state="active", limit=5)
    assert listed.data == []
    assert (listed.metadata.has_more, listed.metadata.limit) == (False, 5)
    with pytest.raises(NotFoundError):
        await tools.get_task(ROOM)
    with pytest.raises(NotFoundError):
        await tools.get_task_history(ROOM)
    async with raw_client(emu.rest_url, key) as client:
        elsewhere = await create_room(human, "not joined")
        hidden = await client.get(f"/api/v1/agent/chats/{elsewhere}/tasks")
        assert_error(hidden, 404, "not_found")
        bad = await client.get(f"/api/v1/agent/chats/{tools.room_id}/tasks?state=done")
        assert "/state" in assert_error(bad, 422, "validation_error")["details"]


async def test_writes_stay_unhandled_and_are_logged_once(
    emu: Emulator, human: AsyncRestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bandkit.emulator")
    _, key = await _tools(emu, human)
    async with raw_client(emu.rest_url, key) as client:
        for _ in range(2):
            stored = await client.post("/api/v1/agent/memories", json={"memory": {}})
            assert_error(stored, 404, "not_found")
    lines = [r.getMessage() for r in caplog.records if "UNHANDLED" in r.getMessage()]
    assert lines == ["UNHANDLED POST /api/v1/agent/memories"]
