"""Agent-created rooms and agent-side participant management, through the real SDK.

Happy paths drive the SDK's own platform tools (`band.runtime.tools.AgentTools`:
`create_chatroom`, `lookup_peers`, `add_participant`, `remove_participant`) and the
Fern `band_rest` agent client; pushes are read on raw sockets and run through
`band_sdk_core.validate_event_payload`, the validator the SDK applies to each push.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from band.client.rest import AsyncRestClient
from band.client.streaming import WebSocketClient
from band.runtime.tools import AgentTools
from band_rest import ChatRoomRequest, ParticipantRequest, RenameAgentChatRequestChat
from band_rest.errors import ForbiddenError, NotFoundError
from band_sdk_core import validate_event_payload

from bandkit.emulator.server import Emulator
from tests.emulator.conftest import StartEmulator
from tests.emulator.support import (
    ROOM,
    USER_KEY,
    AgentProcess,
    Frame,
    Registered,
    add,
    assert_error,
    assert_refuses_wrong_keys,
    create_room,
    human_client,
    mention,
    peer,
    raw_client,
    register,
)
from tests.support.wait import until

ROUTES = [
    ("POST", "/api/v1/agent/chats"),
    ("PATCH", f"/api/v1/agent/chats/{ROOM}"),
    ("POST", f"/api/v1/agent/chats/{ROOM}/participants"),
    ("DELETE", f"/api/v1/agent/chats/{ROOM}/participants/{ROOM}"),
    ("GET", "/api/v1/agent/peers"),
]


def rest(emu: Emulator, agent: Registered) -> AsyncRestClient:
    return AsyncRestClient(api_key=agent.key, base_url=emu.rest_url)


def tools(emu: Emulator, agent: Registered, room_id: str = "") -> AgentTools:
    return AgentTools(room_id, rest(emu, agent), agent_id=agent.id)


def validated(frame: Frame, event: str) -> dict[str, object]:
    assert frame[3] == event, frame
    validate_event_payload(event, frame[4])
    payload: dict[str, object] = frame[4]
    return payload


async def as_admin(human: AsyncRestClient, room: str, agent_id: str) -> None:
    await human.human_api_participants.add_my_chat_participant(
        chat_id=room, participant=ParticipantRequest(participant_id=agent_id, role="admin")
    )


async def roster(emu: Emulator, agent: Registered, room: str) -> dict[str, str]:
    listed = await rest(emu, agent).agent_api_participants.list_agent_chat_participants(room)
    return {p.id: p.role for p in listed.data}


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_route_refuses_missing_invalid_and_user_keys(
    emu: Emulator, method: str, path: str
) -> None:
    await assert_refuses_wrong_keys(emu.rest_url, method, path, USER_KEY)


async def test_agent_creates_a_room_it_owns_and_is_told_about(
    emu: Emulator, human: AsyncRestClient
) -> None:
    planner = await register(human, "Planner")
    async with peer(emu, planner.key, f"vsn=2.0.0&agent_id={planner.id}") as sock:
        join_ref, _ = await sock.join(f"agent_rooms:{planner.id}")
        room = await tools(emu, planner).create_chatroom(task_id="task-7")
        added = await sock.recv()
        assert added[0] == join_ref
        assert validated(added, "room_added")["id"] == room
    assert await roster(emu, planner, room) == {planner.id: "owner"}
    chat = await rest(emu, planner).agent_api_chats.get_agent_chat(room)
    assert chat.data.task_id == "task-7"
    assert chat.data.title is None
    listed = await rest(emu, planner).agent_api_chats.list_agent_chats()
    assert room in {r.id for r in listed.data}
    titled = await rest(emu, planner).agent_api_chats.create_agent_chat(
        chat=ChatRoomRequest(title="  Sprint plan  ")
    )
    assert titled.data.title == "Sprint plan"  # trimmed, like the platform
    async with raw_client(emu.rest_url, planner.key) as client:
        for title in ("a\nb", "x" * 121):
            bad = await client.post("/api/v1/agent/chats", json={"chat": {"title": title}})
            assert assert_error(bad, 422, "validation_error")["details"] == {
                "/chat/title": [bad.json()["error"]["details"]["/chat/title"][0]]
            }
        wrong = await client.post("/api/v1/agent/chats", json={"chat": "not an object"})
        assert_error(wrong, 422, "validation_error")


async def test_owner_recruits_a_peer_with_the_sdk_tools(
    emu: Emulator, human: AsyncRestClient
) -> None:
    planner = await register(human, "Planner")
    coder = await register(human, "Coder")
    reviewer = await register(human, "Reviewer")
    room = await tools(emu, planner).create_chatroom()
    planner_tools = tools(emu, planner, room)
    peers = await planner_tools.lookup_peers()
    assert {p.id for p in peers.data} == {coder.id, reviewer.id}  # never itself
    assert peers.metadata.total_pages == 1
    coder_peer = next(p for p in peers.data if p.id == coder.id)
    assert (coder_peer.handle, coder_peer.type, coder_peer.online) == ("coder", "Agent", False)
    async with (
        peer(emu, coder.key, f"vsn=2.0.0&agent_id={coder.id}") as coder_sock,
        peer(emu, planner.key, f"vsn=2.0.0&agent_id={planner.id}") as planner_sock,
    ):
        await coder_sock.join(f"agent_rooms:{coder.id}")
        await planner_sock.join(f"room_participants:{room}")
        result = await planner_tools.add_participant("@coder")
        assert result == {"id": coder.id, "name": "Coder", "role": "member", "status": "added"}
        assert validated(await coder_sock.recv(), "room_added")["id"] == room
        joined = validated(await planner_sock.recv(), "participant_added")
        assert joined == {"id": coder.id, "name": "Coder", "type": "Agent", "handle": "coder"}
        peer_list = await planner_tools.lookup_peers()
        assert {p.id for p in peer_list.data} == {reviewer.id}  # not_in_chat applied
        online = await tools(emu, reviewer).lookup_peers()
        assert {p.id: p.online for p in online.data} == {planner.id: True, coder.id: True}
    again = await planner_tools.add_participant("Coder")
    assert again["status"] == "already_in_room"
    with pytest.raises(ValueError, match="not found"):
        await planner_tools.add_participant("nobody")
    assert await roster(emu, coder, room) == {planner.id: "owner", coder.id: "member"}
    # Any participant may recruit, as a member only (the custody tests cover the refusals).
    await tools(emu, coder, room).add_participant("reviewer")
    assert (await roster(emu, planner, room))[reviewer.id] == "member"


async def test_add_refusals_match_the_platform(emu: Emulator, human: AsyncRestClient) -> None:
    planner = await register(human, "Planner")
    outsider = await register(human, "Outsider")
    room = await tools(emu, planner).create_chatroom()
    path = f"/api/v1/agent/chats/{room}/participants"
    async with raw_client(emu.rest_url, planner.key) as client:
        unknown = {"participant": {"participant_id": ROOM}}
        assert_error(await client.post(path, json=unknown), 404, "not_found")
        twice = {"participant": {"participant_id": planner.id}}
        assert_error(await client.post(path, json=twice), 422, "validation_error")
        bad_role = {"participant": {"participant_id": outsider.id, "role": "king"}}
        error = assert_error(await client.post(path, json=bad_role), 422, "validation_error")
        assert "/participant/role" in error["details"]
        assert_error(await client.post(path, json={}), 422, "validation_error")
    with pytest.raises(NotFoundError):  # a room it is not in does not exist for it
        await rest(emu, outsider).agent_api_participants.add_agent_chat_participant(
            room, participant=ParticipantRequest(participant_id=outsider.id)
        )


async def test_only_owner_or_admin_removes_and_the_owner_stays(
    emu: Emulator, human: AsyncRestClient
) -> None:
    planner = await register(human, "Planner")
    coder = await register(human, "Coder")
    reviewer = await register(human, "Reviewer")
    room = await tools(emu, planner).create_chatroom()
    planner_tools = tools(emu, planner, room)
    await planner_tools.add_participant(coder.id)
    await as_admin(human, room, reviewer.id)  # only the user hands out admin
    with pytest.raises(ForbiddenError):
        await tools(emu, coder, room).remove_participant("reviewer")
    with pytest.raises(ForbiddenError):  # the owner stays
        await rest(emu, planner).agent_api_participants.remove_agent_chat_participant(
            room, planner.id
        )
    async with raw_client(emu.rest_url, planner.key) as client:
        gone = await client.delete(f"/api/v1/agent/chats/{room}/participants/{ROOM}")
        assert_error(gone, 404, "not_found")
    async with (
        peer(emu, coder.key, f"vsn=2.0.0&agent_id={coder.id}") as coder_sock,
        peer(emu, planner.key, f"vsn=2.0.0&agent_id={planner.id}") as planner_sock,
    ):
        await coder_sock.join(f"agent_rooms:{coder.id}")
        await planner_sock.join(f"room_participants:{room}")
        result = await planner_tools.remove_participant("Coder")
        assert result == {"id": coder.id, "name": "Coder", "status": "removed"}
        assert validated(await coder_sock.recv(), "room_removed")["id"] == room
        left = validated(await planner_sock.recv(), "participant_removed")
        assert left["id"] == coder.id
    assert set(await roster(emu, planner, room)) == {planner.id, reviewer.id}
    with pytest.raises(NotFoundError):  # the removed agent no longer sees the room
        await rest(emu, coder).agent_api_chats.get_agent_chat(room)
    # An admin may remove members too.
    await planner_tools.add_participant(coder.id)
    await tools(emu, reviewer, room).remove_participant(coder.id)
    assert set(await roster(emu, planner, room)) == {planner.id, reviewer.id}


async def test_agent_invites_its_owner_who_is_told_and_can_be_removed(
    emu: Emulator, human: AsyncRestClient
) -> None:
    planner = await register(human, "Planner")
    room = await tools(emu, planner).create_chatroom()
    profile = await human.human_api_profile.get_my_profile()
    user_id = profile.data.id
    async with peer(emu, USER_KEY) as user_sock:
        await user_sock.join(f"user_rooms:{user_id}")
        added = await rest(emu, planner).agent_api_participants.add_agent_chat_participant(
            room, participant=ParticipantRequest(participant_id=user_id)
        )
        assert (added.data.type, added.data.role) == ("User", "member")
        assert validated(await user_sock.recv(), "room_added")["id"] == room
        people = await tools(emu, planner, room).get_participants()
        assert {p.type for p in people} == {"User", "Agent"}
        await rest(emu, planner).agent_api_participants.remove_agent_chat_participant(room, user_id)
        assert validated(await user_sock.recv(), "room_removed")["id"] == room


async def test_rename_is_for_the_owner_only(emu: Emulator, human: AsyncRestClient) -> None:
    planner = await register(human, "Planner")
    coder = await register(human, "Coder")
    outsider = await register(human, "Outsider")
    room = await tools(emu, planner).create_chatroom()
    await tools(emu, planner, room).add_participant(coder.id)
    chats = rest(emu, planner).agent_api_chats
    renamed = await chats.rename_agent_chat(room, chat=RenameAgentChatRequestChat(title=" Plan "))
    assert renamed.data.title == "Plan"
    assert renamed.data.updated_at >= renamed.data.inserted_at
    same = await chats.rename_agent_chat(room, chat=RenameAgentChatRequestChat(title="Plan"))
    assert same.data.updated_at == renamed.data.updated_at  # idempotent
    with pytest.raises(ForbiddenError):
        await rest(emu, coder).agent_api_chats.rename_agent_chat(
            room, chat=RenameAgentChatRequestChat(title="Mine")
        )
    with pytest.raises(NotFoundError):
        await rest(emu, outsider).agent_api_chats.rename_agent_chat(
            room, chat=RenameAgentChatRequestChat(title="Mine")
        )
    async with raw_client(emu.rest_url, planner.key) as client:
        for title in ("   ", "a\rb", "nul\x00", "y" * 121):
            bad = await client.patch(f"/api/v1/agent/chats/{room}", json={"chat": {"title": title}})
            assert "/chat/title" in assert_error(bad, 422, "validation_error")["details"]
    room_view = await human.human_api_chats.get_my_chat_room(room)
    assert room_view.data.title == "Plan"


async def test_agent_rooms_survive_a_restart(tmp_path: Path, start_emulator: StartEmulator) -> None:
    state_file = tmp_path / "state.json"
    first = await start_emulator(state_file=state_file)
    human = human_client(first.rest_url)
    planner = await register(human, "Planner")
    coder = await register(human, "Coder")
    room = await tools(first, planner).create_chatroom()
    await rest(first, planner).agent_api_chats.rename_agent_chat(
        room, chat=RenameAgentChatRequestChat(title="kept")
    )
    await as_admin(human, room, coder.id)
    await first.shutdown(2.0)
    second = await start_emulator(state_file=state_file)
    assert await roster(second, coder, room) == {planner.id: "owner", coder.id: "admin"}
    chat = await rest(second, coder).agent_api_chats.get_agent_chat(room)
    assert chat.data.title == "kept"


async def test_running_sdk_agent_invited_by_a_peer_answers_there(
    emu: Emulator, human: AsyncRestClient, echo_agents: Callable[..., AgentProcess]
) -> None:
    """A real `band.Agent` joins a room another agent created (the `room_added` path)."""
    planner = await register(human, "Planner")
    echo = await register(human, "Echo Bot")
    process = echo_agents(echo, emu.rest_url, emu.ws_url)

    def online() -> bool:
        assert emu.platform is not None
        sock = emu.platform.broker.agent_sockets.get(echo.id)
        return sock is not None and f"agent_rooms:{echo.id}" in sock.topics

    await until(online, timeout=60, what="the echo agent to join agent_rooms")
    room = await tools(emu, planner).create_chatroom()
    planner_tools = tools(emu, planner, room)
    await planner_tools.add_participant("echo-bot")
    await until(
        lambda: (
            f"chat_room:{room}" in emu.platform.broker.agent_sockets[echo.id].topics
            if emu.platform is not None
            else False
        ),
        timeout=30,
        what="the echo agent to join the new room",
    )
    await planner_tools.send_message("@echo-bot ping from a peer", mentions=["echo-bot"])
    client = rest(emu, planner)

    async def replied() -> bool:
        context = await client.agent_api_context.get_agent_chat_context(room)
        return any(
            m.sender_id == echo.id and "ping from a peer" in (m.content or "") for m in context.data
        )

    await until(replied, timeout=30, what="the echo agent's reply in the peer's room")
    assert process.proc is not None
    assert process.proc.poll() is None
    log = process.log()
    assert "Traceback" not in log, log[-3000:]
    assert planner.key not in log
    assert echo.key not in log


async def test_unimplemented_agent_paths_are_logged_per_request_as_templates(
    emu: Emulator, human: AsyncRestClient, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    async with raw_client(emu.rest_url, agent.key) as client:
        for _ in range(2):
            missing = await client.get(f"/api/v1/agent/chats/{room}/files")
            assert_error(missing, 404, "not_found")
    lines = [r.getMessage() for r in caplog.records if "UNHANDLED" in r.getMessage()]
    assert lines == ["UNHANDLED GET /api/v1/agent/chats/{id}/files"] * 2


async def test_a_removed_sdk_agent_hears_nothing_more_of_the_room_and_leaves_cleanly(
    emu: Emulator, human: AsyncRestClient
) -> None:
    """The SDK's own client, removed from a room: it hears of its removal and nothing
    after it (a newcomer, a message), and the channel leaves the SDK makes on
    `room_removed` still succeed."""
    gone, newcomer = await register(human, "Gone"), await register(human, "New")
    room, later = await create_room(human), await create_room(human, "later")
    await add(human, room, gone.id)
    heard: list[tuple[str, str]] = []

    def record(kind: str) -> Callable[[Any], Awaitable[None]]:
        async def callback(payload: Any) -> None:
            heard.append((kind, str(payload.id)))

        return callback

    client = WebSocketClient(emu.ws_url, gone.key, agent_id=gone.id)
    await client.__aenter__()
    try:
        await client.join_room_participants_channel(room, record("added"), record("removed"))
        await client.join_chat_room_channel(room, record("message"), record("updated"))
        await client.join_agent_rooms_channel(gone.id, record("room"), record("room_gone"))
        await human.human_api_participants.remove_my_chat_participant(chat_id=room, id=gone.id)
        await until(lambda: ("room_gone", room) in heard, what="its removal")
        await add(human, room, newcomer.id)
        await mention(human, room, Registered(newcomer.id, newcomer.key, "New"), "hello")
        await add(human, later, gone.id)  # a push it does get, queued after the others
        await until(lambda: ("room", later) in heard, what="the later room")
        assert heard == [("removed", gone.id), ("room_gone", room), ("room", later)]
        await client.leave_room_participants_channel(room)  # no "topic not subscribed"
        await client.leave_chat_room_channel(room)
    finally:
        await client.__aexit__(None, None, None)
