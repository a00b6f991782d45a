"""The agent API, endpoint by endpoint, including the lifecycle's 200/204/422 semantics.

Happy paths go through the real `band_rest` client with the agent key (Fern validates
each response); refusals through raw HTTP.
"""

from __future__ import annotations

import pytest
from band.client.rest import AsyncRestClient
from band_rest import ChatEventRequest, ChatMessageRequest
from band_rest.types import ChatMessageRequestMentionsItem

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    ROOM,
    USER_KEY,
    Registered,
    add,
    assert_error,
    assert_refuses_wrong_keys,
    create_room,
    mention,
    raw_client,
    register,
)

AGENT_ROUTES = [
    ("GET", "/api/v1/agent/me"),
    ("GET", "/api/v1/agent/chats"),
    ("GET", f"/api/v1/agent/chats/{ROOM}"),
    ("GET", f"/api/v1/agent/chats/{ROOM}/participants"),
    ("GET", f"/api/v1/agent/chats/{ROOM}/context"),
    ("GET", f"/api/v1/agent/chats/{ROOM}/messages"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/messages"),
    ("GET", f"/api/v1/agent/chats/{ROOM}/messages/next"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/messages/{ROOM}/processing"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/messages/{ROOM}/processed"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/messages/{ROOM}/failed"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/activity"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/events"),
]


def agent_client(emu: Emulator, agent: Registered) -> AsyncRestClient:
    return AsyncRestClient(api_key=agent.key, base_url=emu.rest_url)


async def _setup(human: AsyncRestClient) -> tuple[Registered, str]:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    return agent, room


def msg_path(room: str, message: str, action: str) -> str:
    return f"/api/v1/agent/chats/{room}/messages/{message}/{action}"


@pytest.mark.parametrize(("method", "path"), AGENT_ROUTES)
async def test_every_agent_route_refuses_missing_invalid_and_user_keys(
    emu: Emulator, method: str, path: str
) -> None:
    await assert_refuses_wrong_keys(emu.rest_url, method, path, USER_KEY)


async def test_me_and_chats_paging(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    other = await create_room(human, "second")
    await add(human, other, agent.id)
    await create_room(human, "not mine")
    client = agent_client(emu, agent)
    me = await client.agent_api_identity.get_agent_me()
    assert me.data.id == agent.id
    assert me.data.description  # an empty one makes Agent.start() fail
    first = await client.agent_api_chats.list_agent_chats(page=1, page_size=1)
    second = await client.agent_api_chats.list_agent_chats(page=2, page_size=1)
    assert first.metadata.total_pages == 2
    assert {first.data[0].id, second.data[0].id} == {room, other}
    got = await client.agent_api_chats.get_agent_chat(id=room)
    assert got.data.id == room


async def test_rooms_the_agent_is_not_in_are_404(emu: Emulator, human: AsyncRestClient) -> None:
    agent = await register(human)
    room = await create_room(human)
    async with raw_client(emu.rest_url, agent.key) as client:
        for method, path in AGENT_ROUTES[2:]:
            real = path.replace(ROOM, room, 1)
            assert_error(await client.request(method, real, json={}), 404, "not_found")


async def test_participants_and_context(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    await mention(human, room, agent, "history")
    client = agent_client(emu, agent)
    people = await client.agent_api_participants.list_agent_chat_participants(chat_id=room)
    assert all(p.handle for p in people.data)  # the SDK needs handles to mention senders
    assert {p.type for p in people.data} == {"User", "Agent"}
    context = await client.agent_api_context.get_agent_chat_context(chat_id=room)
    assert [m.content for m in context.data] == [f"@{agent.name} history"]
    assert context.metadata.has_more is False


async def test_lifecycle_next_processing_processed(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    async with raw_client(emu.rest_url, agent.key) as client:
        assert (await client.get(f"/api/v1/agent/chats/{room}/messages/next")).status_code == 204
        first = await mention(human, room, agent, "first")
        await mention(human, room, agent, "second")
        nxt = await client.get(f"/api/v1/agent/chats/{room}/messages/next")
        assert nxt.status_code == 200
        assert nxt.json()["data"]["id"] == first
        early = await client.post(msg_path(room, first, "processed"))
        assert "/processing_attempt" in assert_error(early, 422, "validation_error")["details"]
        claimed = await client.post(msg_path(room, first, "processing"))
        assert claimed.status_code == 200
        assert claimed.json()["data"] == {
            "id": first,
            "status": "processing",
            "attempt_number": 1,
            "success": True,
        }
        # a message being processed is still served by /next (it gets replayed)
        nxt = await client.get(f"/api/v1/agent/chats/{room}/messages/next")
        assert nxt.json()["data"]["id"] == first
        done = await client.post(msg_path(room, first, "processed"))
        assert done.json()["data"]["status"] == "processed"
        assert_error(await client.post(msg_path(room, first, "processed")), 422, "validation_error")
        assert_error(
            await client.post(msg_path(room, first, "processing")), 422, "validation_error"
        )
        nxt = await client.get(f"/api/v1/agent/chats/{room}/messages/next")
        assert nxt.json()["data"]["content"].endswith("second")
        assert_error(await client.post(msg_path(room, ROOM, "processing")), 404, "not_found")


async def test_lifecycle_failed_is_replayed(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    message = await mention(human, room, agent, "flaky")
    client = agent_client(emu, agent)
    await client.agent_api_messages.mark_agent_message_processing(chat_id=room, id=message)
    failed = await client.agent_api_messages.mark_agent_message_failed(
        chat_id=room, id=message, error="boom"
    )
    assert failed is not None
    assert failed.data.status == "failed"
    again = await client.agent_api_messages.get_agent_next_message(chat_id=room)
    assert again is not None
    assert again.data.id == message
    second = await client.agent_api_messages.mark_agent_message_processing(chat_id=room, id=message)
    assert second is not None
    assert second.data.attempt_number == 2
    async with raw_client(emu.rest_url, agent.key) as raw:
        bad = await raw.post(msg_path(room, message, "failed"), json={"error": 5})
        assert_error(bad, 422, "validation_error")
        assert_error(
            await raw.post(msg_path(room, message, "failed"), content=b"{"), 400, "bad_request"
        )


async def test_list_messages_by_status_and_cursor(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    ids = [await mention(human, room, agent, f"m{i}") for i in range(3)]
    client = agent_client(emu, agent)
    await client.agent_api_messages.mark_agent_message_processing(chat_id=room, id=ids[0])
    await client.agent_api_messages.mark_agent_message_processed(chat_id=room, id=ids[0])
    pending = await client.agent_api_messages.list_agent_messages(
        chat_id=room, sort_order="asc", limit=1
    )
    assert [m.id for m in pending.data] == [ids[1]]
    assert pending.metadata.has_more is True
    rest = await client.agent_api_messages.list_agent_messages(
        chat_id=room, sort_order="asc", limit=1, cursor=pending.metadata.next_cursor
    )
    assert [m.id for m in rest.data] == [ids[2]]
    assert rest.metadata.has_more is False
    done = await client.agent_api_messages.list_agent_messages(chat_id=room, status="processed")
    assert [m.id for m in done.data] == [ids[0]]
    async with raw_client(emu.rest_url, agent.key) as raw:
        path = f"/api/v1/agent/chats/{room}/messages"
        assert_error(await raw.get(f"{path}?status=bogus"), 422, "validation_error")
        assert_error(await raw.get(f"{path}?cursor=abc"), 422, "validation_error")
        assert_error(await raw.get(f"{path}?sort_order=up"), 422, "validation_error")


async def test_activity(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    client = agent_client(emu, agent)
    working = await client.agent_api_activity.report_agent_chat_activity(chat_id=room, working=True)
    assert working.data.working is True
    async with raw_client(emu.rest_url, agent.key) as raw:
        path = f"/api/v1/agent/chats/{room}/activity"
        assert_error(await raw.post(path, json={}), 422, "validation_error")
        assert_error(await raw.post(path, json={"working": "yes"}), 422, "validation_error")


async def test_post_message_and_events(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    client = agent_client(emu, agent)
    profile = await human.human_api_profile.get_my_profile()
    sent = await client.agent_api_messages.create_agent_chat_message(
        chat_id=room,
        message=ChatMessageRequest(
            content="hello human",
            mentions=[
                ChatMessageRequestMentionsItem(id=profile.data.id, handle=profile.data.handle)
            ],
        ),
    )
    assert sent.data.recipients[0].id == profile.data.id
    assert sent.data.recipients[0].handle == profile.data.handle
    event = await client.agent_api_events.create_agent_chat_event(
        chat_id=room, event=ChatEventRequest(content="thinking", message_type="thought")
    )
    assert event.data.message_type == "thought"
    listed = await human.human_api_messages.list_my_chat_messages(chat_id=room)
    assert [(m.message_type, m.content) for m in listed.data] == [
        ("thought", "thinking"),
        ("text", "hello human"),
    ]
    outsider = await register(human, "Outsider")
    async with raw_client(emu.rest_url, agent.key) as raw:
        path = f"/api/v1/agent/chats/{room}"
        body = {"message": {"content": "x", "mentions": [{"id": outsider.id}]}}
        assert_error(await raw.post(f"{path}/messages", json=body), 422, "validation_error")
        assert_error(await raw.post(f"{path}/messages", json={}), 422, "validation_error")
        bad_type = {"event": {"content": "x", "message_type": "gossip"}}
        assert_error(await raw.post(f"{path}/events", json=bad_type), 422, "validation_error")
        bad_meta = {"event": {"content": "x", "message_type": "thought", "metadata": [1]}}
        assert_error(await raw.post(f"{path}/events", json=bad_meta), 422, "validation_error")
        assert_error(await raw.post(f"{path}/events", content=b"]"), 400, "bad_request")


async def test_stopped_room_answers_204_until_play(emu: Emulator, human: AsyncRestClient) -> None:
    agent, room = await _setup(human)
    message = await mention(human, room, agent, "halt")
    async with raw_client(emu.rest_url) as control, raw_client(emu.rest_url, agent.key) as raw:
        ctl = f"/_emulator/agents/{agent.id}/control"
        assert (await control.post(ctl, json={"mode": "stop", "room_id": room})).status_code == 200
        assert (await raw.post(msg_path(room, message, "processing"))).status_code == 204
        activity = await raw.post(f"/api/v1/agent/chats/{room}/activity", json={"working": True})
        assert activity.json()["data"]["working"] is False
        assert (await control.post(ctl, json={"mode": "play"})).status_code == 200
        assert (await raw.post(msg_path(room, message, "processing"))).status_code == 200
        assert_error(await control.post(ctl, json={"mode": "dance"}), 422, "validation_error")
        ghost = f"/_emulator/agents/{ROOM}/control"
        assert_error(await control.post(ghost, json={"mode": "stop"}), 404, "not_found")
