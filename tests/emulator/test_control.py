"""The control API under /_emulator/: auth, health, redacted state, drop and pause faults."""

from __future__ import annotations

import time

import pytest
from band.client.rest import AsyncRestClient

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    USER_KEY,
    add,
    assert_error,
    create_room,
    mention,
    peer,
    raw_client,
    register,
)

CONTROL_ROUTES = [
    ("GET", "/_emulator/health"),
    ("GET", "/_emulator/state"),
    ("POST", "/_emulator/login-link"),
    ("POST", "/_emulator/faults/drop"),
    ("POST", "/_emulator/faults/pause?seconds=1"),
    ("POST", "/_emulator/agents/x/control"),
]


@pytest.mark.parametrize(("method", "path"), CONTROL_ROUTES)
async def test_control_needs_the_user_key(
    emu: Emulator, human: AsyncRestClient, method: str, path: str
) -> None:
    agent = await register(human)
    for key, status in ((None, 401), ("wrong", 401), (agent.key, 403)):
        async with raw_client(emu.rest_url, key) as client:
            assert (await client.request(method, path)).status_code == status
    async with raw_client(emu.rest_url) as client:
        assert (await client.get("/_emulator/health")).json()["data"]["status"] == "ok"


async def test_state_snapshot_has_everything_but_keys(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    await mention(human, room, agent, "snap")
    async with raw_client(emu.rest_url) as client:
        response = await client.get("/_emulator/state")
    text = response.text
    state = response.json()["data"]
    assert state["agents"][agent.id]["name"] == agent.name
    assert agent.id in state["rooms"][room]["participants"]
    (message,) = state["messages"].values()
    assert message["deliveries"][agent.id]["status"] == "delivered"
    assert "key_sha256" not in text
    assert agent.key not in text
    assert USER_KEY not in text


async def test_drop_aborts_every_socket(emu: Emulator, human: AsyncRestClient) -> None:
    async with peer(emu, USER_KEY) as one, peer(emu, USER_KEY):
        await one.heartbeat()
        async with raw_client(emu.rest_url) as client:
            dropped = (await client.post("/_emulator/faults/drop")).json()["data"]["dropped"]
        assert dropped == 2
        await one.ws.wait_closed()
        assert one.ws.close_code == 1006  # no close frame: what a network cut looks like


async def test_pause_holds_agents_and_sockets_not_the_human_api(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    async with (
        raw_client(emu.rest_url) as client,
        raw_client(emu.rest_url, agent.key) as agent_http,
        peer(emu, USER_KEY) as watcher,
    ):
        assert_error(await client.post("/_emulator/faults/pause"), 422, "validation_error")
        bad = await client.post("/_emulator/faults/pause?seconds=-1")
        assert_error(bad, 422, "validation_error")
        paused = await client.post("/_emulator/faults/pause?seconds=1.0")
        assert paused.json()["data"] == {"paused_for": 1.0}
        assert (await client.get("/_emulator/health")).json()["data"]["status"] == "paused"
        started = time.monotonic()
        ref = await watcher.send(None, "phoenix", "heartbeat")
        await create_room(human)  # the human API still answers during a pause
        assert time.monotonic() - started < 0.7
        me = await agent_http.get("/api/v1/agent/me")  # held until the pause ends
        waited = time.monotonic() - started
        assert me.status_code == 200
        assert 0.7 <= waited < 5, waited
        reply = await watcher.recv()
        assert reply[1] == ref
        assert (await client.get("/_emulator/health")).json()["data"]["status"] == "ok"
