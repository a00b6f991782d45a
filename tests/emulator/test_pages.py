"""The room pages over HTTP: sign-in, index, room page, the live feed, the page's API calls."""

from __future__ import annotations

import json
from typing import Any

import httpx
from band.client.rest import AsyncRestClient

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    PAGE_CALL,
    USER_KEY,
    add,
    create_room,
    mention,
    page_client,
    raw_client,
    register,
    sign_in,
)


async def _events(response: httpx.Response) -> Any:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


async def test_index_and_room_page(emu: Emulator, human: AsyncRestClient) -> None:
    room = await create_room(human, "Launch <plan>")
    cookie = await sign_in(emu.rest_url)
    async with page_client(emu.rest_url, cookie) as client:
        index = await client.get("/")
        assert index.status_code == 200
        assert f'href="/rooms/{room}"' in index.text
        assert "Launch &lt;plan&gt;" in index.text  # escaped
        assert index.headers["x-frame-options"] == "DENY"
        page = await client.get(f"/rooms/{room}")
        assert page.status_code == 200
        assert "EventSource" in page.text
        assert 'id="composer"' in page.text
        assert (await client.get("/rooms/nope")).status_code == 404
        assert (await client.get("/rooms/nope/feed")).status_code == 404
        assert USER_KEY not in index.text + page.text


async def test_scripts_may_use_the_user_key_header_instead(
    emu: Emulator, human: AsyncRestClient
) -> None:
    room = await create_room(human)
    async with raw_client(emu.rest_url) as client:
        assert (await client.get("/")).status_code == 200
        assert (await client.get(f"/rooms/{room}")).status_code == 200
    agent = await register(human)
    async with raw_client(emu.rest_url, agent.key) as client:  # an agent key is not the user
        assert (await client.get("/")).status_code == 401


async def test_the_login_page_moves_the_fragment_into_a_form_post(emu: Emulator) -> None:
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:
        page = await client.get("/login")
    assert page.status_code == 200
    assert 'method="post" action="/login"' in page.text
    assert "location.hash" in page.text
    assert "history.replaceState" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"


async def test_room_feed_sends_snapshot_then_live_changes(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    first = await mention(human, room, agent, "before the page opened")
    cookie = await sign_in(emu.rest_url)
    async with (
        page_client(emu.rest_url, cookie) as client,
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


async def test_the_page_posts_mentions_and_adds_agents_as_the_user(
    emu: Emulator, human: AsyncRestClient
) -> None:
    """The calls room.html makes with the cookie: list agents, add one, post a mention."""
    echo = await register(human, "Echo Bot")
    other = await register(human, "Helper")
    room = await create_room(human)
    cookie = await sign_in(emu.rest_url)
    async with page_client(emu.rest_url, cookie, **PAGE_CALL) as page:
        mine = await page.get("/api/v1/me/agents?page_size=1000")
        assert {a["id"] for a in mine.json()["data"]} == {echo.id, other.id}
        added = await page.post(
            f"/api/v1/me/chats/{room}/participants",
            json={"participant": {"participant_id": echo.id, "role": "member"}},
        )
        assert added.status_code == 201, added.text
        sent = await page.post(
            f"/api/v1/me/chats/{room}/messages",
            json={
                "message": {
                    "content": "@Echo Bot hello",
                    "mentions": [{"id": echo.id, "handle": "echo-bot", "name": "Echo Bot"}],
                }
            },
        )
        assert sent.status_code == 201, sent.text
        assert [r["id"] for r in sent.json()["data"]["recipients"]] == [echo.id]
    listed = await human.human_api_messages.list_my_chat_messages(chat_id=room)
    profile = await human.human_api_profile.get_my_profile()
    assert listed.data[0].sender_id == profile.data.id
    assert listed.data[0].sender_type == "User"


async def test_the_user_cannot_post_in_a_room_it_is_not_in(
    emu: Emulator, human: AsyncRestClient
) -> None:
    planner = await register(human, "Planner")
    async with raw_client(emu.rest_url, planner.key) as agent_http:
        created = await agent_http.post("/api/v1/agent/chats", json={"chat": {}})
    room = created.json()["data"]["id"]
    async with raw_client(emu.rest_url) as client:
        posted = await client.post(
            f"/api/v1/me/chats/{room}/messages", json={"message": {"content": "hi"}}
        )
    assert posted.status_code == 403, posted.text
    assert posted.json()["error"]["code"] == "forbidden"
