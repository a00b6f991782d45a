"""The read-only pages over HTTP: index, room page, and the live feed's events."""

from __future__ import annotations

import json
from typing import Any

import httpx
from band.client.rest import AsyncRestClient

from bandkit.emulator.server import Emulator
from tests.emulator.support import USER_KEY, add, create_room, mention, raw_client, register


async def _events(response: httpx.Response) -> Any:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


async def test_index_and_room_page(emu: Emulator, human: AsyncRestClient) -> None:
    room = await create_room(human, "Launch <plan>")
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:  # no key: read-only pages
        index = await client.get("/")
        assert index.status_code == 200
        assert f'href="/rooms/{room}"' in index.text
        assert "Launch &lt;plan&gt;" in index.text  # escaped
        page = await client.get(f"/rooms/{room}")
        assert page.status_code == 200
        assert "EventSource" in page.text
        assert (await client.get("/rooms/nope")).status_code == 404
        assert (await client.get("/rooms/nope/feed")).status_code == 404
        assert USER_KEY not in index.text


async def test_room_feed_sends_snapshot_then_live_changes(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    first = await mention(human, room, agent, "before the page opened")
    async with (
        httpx.AsyncClient(base_url=emu.rest_url, timeout=10) as client,
        client.stream("GET", f"/rooms/{room}/feed") as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events(response)
        snapshot = await anext(events)
        assert snapshot["event"] == "snapshot"
        assert [m["id"] for m in snapshot["payload"]["messages"]] == [first]
        assert {p["type"] for p in snapshot["payload"]["participants"]} == {"User", "Agent"}
        second = await mention(human, room, agent, "live")
        live = await anext(events)
        assert (live["event"], live["payload"]["id"]) == ("message_created", second)
        async with raw_client(emu.rest_url, agent.key) as agent_http:
            thought = {"event": {"content": "pondering", "message_type": "thought"}}
            await agent_http.post(f"/api/v1/agent/chats/{room}/events", json=thought)
            await agent_http.post(f"/api/v1/agent/chats/{room}/activity", json={"working": True})
        event = await anext(events)
        assert (event["event"], event["payload"]["message_type"]) == ("event_created", "thought")
        activity = await anext(events)
        assert activity["event"] == "agent_activity"
        assert activity["payload"]["working"] is True
