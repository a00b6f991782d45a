"""Phoenix Channels V2 frame by frame, with a raw `websockets` client.

Covers upgrade refusals (403, 400, 409 connection_conflict), heartbeat/join/leave
replies, topic authorization, malformed frames, join_ref echo on pushes, the delivery
audience rules, room/participant pushes, an agent removed from a room losing that room's
channels (and every later push of it), and supersede.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from band.client.rest import AsyncRestClient
from band.client.streaming.errors import WebSocketUpgradeError
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    USER_KEY,
    Frame,
    Peer,
    Registered,
    add,
    create_room,
    mention,
    peer,
    raw_client,
    register,
)


async def _refusal(emu: Emulator, key: str | None, query: str) -> InvalidStatus:
    headers = {"x-api-key": key} if key else {}
    with pytest.raises(InvalidStatus) as caught:
        async with connect(f"{emu.ws_url}?{query}", additional_headers=headers):
            pass
    return caught.value


@pytest.mark.parametrize(("key", "status"), [(None, 403), ("nope", 403)])
async def test_upgrade_refused_without_a_valid_key(
    emu: Emulator, key: str | None, status: int
) -> None:
    refusal = await _refusal(emu, key, "vsn=2.0.0")
    assert refusal.response.status_code == status
    assert json.loads(refusal.response.body)["error"]["code"] == "unauthorized"


async def test_upgrade_refused_for_bad_vsn_and_foreign_agent_id(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    assert (await _refusal(emu, USER_KEY, "vsn=1.0.0")).response.status_code == 400
    other = await register(human, "Other")
    refusal = await _refusal(emu, agent.key, f"vsn=2.0.0&agent_id={other.id}")
    assert refusal.response.status_code == 400


async def test_on_conflict_reject_answers_409_the_sdk_classifies(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    async with peer(emu, agent.key, f"vsn=2.0.0&agent_id={agent.id}"):
        refusal = await _refusal(
            emu, agent.key, f"vsn=2.0.0&agent_id={agent.id}&on_conflict=reject"
        )
    parsed = WebSocketUpgradeError.from_exception(refusal)
    assert parsed is not None
    assert parsed.status_code == 409
    assert parsed.is_connection_conflict


async def test_heartbeat_join_leave_and_refusals(emu: Emulator, human: AsyncRestClient) -> None:
    agent = await register(human)
    other = await register(human, "Other")
    room = await create_room(human)
    async with peer(emu, agent.key) as p:
        await p.heartbeat()
        for topic in (f"agent_control:{agent.id}", f"agent_rooms:{agent.id}"):
            _, reply = await p.join(topic)
            assert reply[4] == {"status": "ok", "response": {}}
        for topic, reason in (
            (f"agent_rooms:{other.id}", "unauthorized"),
            (f"chat_room:{room}", "unauthorized"),  # not a participant yet
            (f"user_rooms:{agent.id}", "unauthorized"),
            ("lobby:1", "unmatched topic"),
        ):
            _, reply = await p.join(topic)
            assert reply[4] == {"status": "error", "response": {"reason": reason}}
        jr = p.ref()
        ref = await p.send(jr, f"agent_rooms:{agent.id}", "phx_leave")
        assert await p.recv() == [
            jr,
            ref,
            f"agent_rooms:{agent.id}",
            "phx_reply",
            {"status": "ok", "response": {}},
        ]
        ref = await p.send("9", "nowhere:1", "shout")
        assert (await p.recv())[4] == {"status": "error", "response": {"reason": "unmatched topic"}}


async def test_malformed_frames_are_ignored_and_socket_stays_up(
    emu: Emulator, human: AsyncRestClient
) -> None:
    async with peer(emu, USER_KEY) as p:
        for junk in ("not json", "{}", "[1,2,3]", "[null, 1, 5, 6, {}]"):
            await p.ws.send(junk)
        await p.ws.send(b"\x00binary")
        await p.heartbeat()


async def test_pushes_echo_the_current_join_ref_and_respect_audience(
    emu: Emulator, human: AsyncRestClient
) -> None:
    alpha, beta = await register(human, "Alpha"), await register(human, "Beta")
    room = await create_room(human)
    await add(human, room, alpha.id)
    await add(human, room, beta.id)
    topic = f"chat_room:{room}"
    async with peer(emu, alpha.key) as a, peer(emu, beta.key) as b, peer(emu, USER_KEY) as u:
        jr_a, _ = await a.join(topic)
        jr_a, _ = await a.join(topic)  # a rejoin moves the join_ref
        await b.join(topic)
        jr_u, _ = await u.join(topic)
        message_id = await mention(human, room, alpha, "only alpha")
        pushed = await a.recv()
        assert pushed[:4] == [jr_a, None, topic, "message_created"]
        assert pushed[4]["id"] == message_id
        assert pushed[4]["metadata"]["delivery_status"][alpha.id]["status"] == "delivered"
        seen_by_user = await u.recv()
        assert seen_by_user[:4] == [jr_u, None, topic, "message_created"]
        await b.expect_quiet()  # not mentioned: not delivered
        async with raw_client(emu.rest_url, alpha.key) as client:
            path = f"/api/v1/agent/chats/{room}/messages/{message_id}/processing"
            assert (await client.post(path)).status_code == 200
        updated = await u.recv()
        assert updated[3] == "message_updated"
        assert updated[4]["metadata"]["delivery_status"][alpha.id]["status"] == "processing"
        await a.expect_quiet()  # agents never get message_updated
        async with raw_client(emu.rest_url, alpha.key) as client:
            reply = {"message": {"content": "hi", "mentions": [{"id": alpha.id}]}}
            assert (
                await client.post(f"/api/v1/agent/chats/{room}/messages", json=reply)
            ).is_success
        await a.expect_quiet()  # its own message is never delivered back to the sender
        assert (await u.recv())[3] == "message_created"


async def test_room_and_participant_pushes(emu: Emulator, human: AsyncRestClient) -> None:
    agent = await register(human)
    room = await create_room(human)
    async with peer(emu, agent.key) as a, peer(emu, USER_KEY) as u:
        rooms_topic = f"agent_rooms:{agent.id}"
        jr_rooms, _ = await a.join(rooms_topic)
        jr_people, _ = await u.join(f"room_participants:{room}")
        await add(human, room, agent.id)
        added = await a.recv()
        assert added[:4] == [jr_rooms, None, rooms_topic, "room_added"]
        assert added[4]["id"] == room
        assert {"inserted_at", "updated_at"} <= set(added[4])
        joined = await u.recv()
        assert joined[3] == "participant_added"
        assert joined[4] == {
            "id": agent.id,
            "name": agent.name,
            "type": "Agent",
            "handle": "echo-bot",
        }
        await a.join(f"room_participants:{room}")
        await human.human_api_participants.remove_my_chat_participant(chat_id=room, id=agent.id)
        assert (await u.recv())[3] == "participant_removed"
        events = {(await a.recv())[3], (await a.recv())[3]}
        assert events == {"participant_removed", "room_removed"}
        async with raw_client(emu.rest_url) as client:
            assert (await client.delete(f"/api/v1/me/chats/{room}")).status_code == 204
        deleted = await u.recv()
        assert deleted[:4] == [jr_people, None, f"room_participants:{room}", "room_deleted"]
        assert deleted[4] == {"id": room}


async def test_second_connection_supersedes_the_first(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent: Registered = await register(human)
    async with peer(emu, agent.key) as first:
        control = f"agent_control:{agent.id}"
        jr, _ = await first.join(control)
        async with peer(emu, agent.key) as second:
            pushed = await first.recv()
            assert pushed[:4] == [jr, None, control, "supersede"]
            assert pushed[4]["retryable"] is False
            with pytest.raises(ConnectionClosed):
                await first.recv()
            await second.heartbeat()
            async with raw_client(emu.rest_url) as client:
                health = (await client.get("/_emulator/health")).json()["data"]
            assert health["online_agents"] == [agent.id]
            assert health["sockets"] == 1


async def test_user_rooms_and_agent_control_pushes(emu: Emulator, human: AsyncRestClient) -> None:
    profile = await human.human_api_profile.get_my_profile()
    agent = await register(human)
    async with peer(emu, USER_KEY) as u, peer(emu, agent.key) as a:
        user_topic = f"user_rooms:{profile.data.id}"
        jr_user, _ = await u.join(user_topic)
        control_topic = f"agent_control:{agent.id}"
        jr_control, _ = await a.join(control_topic)
        room = await create_room(human, "announced")
        added = await u.recv()
        assert added[:4] == [jr_user, None, user_topic, "room_added"]
        assert (added[4]["id"], added[4]["title"]) == (room, "announced")
        await add(human, room, agent.id)
        async with raw_client(emu.rest_url) as client:
            body = {"mode": "interrupt", "room_id": room}
            assert (
                await client.post(f"/_emulator/agents/{agent.id}/control", json=body)
            ).is_success
            control = await a.recv()
            assert control[:4] == [jr_control, None, control_topic, "agent.control"]
            assert control[4]["mode"] == "interrupt"
            assert control[4]["scope"] == "room"
            assert control[4]["correlation_id"]
            assert (await client.delete(f"/api/v1/me/chats/{room}")).status_code == 204
        removed = await u.recv()
        assert removed[:4] == [jr_user, None, user_topic, "room_removed"]


async def test_api_key_in_the_query_string_is_not_accepted(emu: Emulator) -> None:
    with pytest.raises(InvalidStatus) as caught:
        async with connect(f"{emu.ws_url}?vsn=2.0.0&api_key={USER_KEY}"):
            pass
    assert caught.value.response.status_code == 403


async def test_real_sdk_agent_with_reject_policy_is_refused_while_another_runs(
    emu: Emulator, human: AsyncRestClient
) -> None:
    from band import Agent
    from band.core.exceptions import AgentAlreadyRunningError
    from band.core.simple_adapter import SimpleAdapter
    from band.core.types import ConflictPolicy
    from band.runtime.agentconfig import AgentConfig

    class Silent(SimpleAdapter[object]):
        async def on_message(self, *args: Any, **kwargs: Any) -> None:
            return None

    agent = await register(human)
    async with peer(emu, agent.key, f"vsn=2.0.0&agent_id={agent.id}") as holder:
        sdk_agent = Agent.create(
            adapter=Silent(),
            agent_id=agent.id,
            api_key=agent.key,
            rest_url=emu.rest_url,
            ws_url=emu.ws_url,
            config=AgentConfig(conflict_policy=ConflictPolicy.REJECT),
        )
        with pytest.raises(AgentAlreadyRunningError):
            await sdk_agent.start()
        await holder.heartbeat()  # the holder was not disturbed


OK = {"status": "ok", "response": {}}


async def _drain(p: Peer) -> list[Frame]:
    """Every frame queued for `p` before now (a heartbeat's reply marks the end)."""
    ref = await p.send(None, "phoenix", "heartbeat")
    frames = []
    while (frame := await p.recv())[1:4] != [ref, "phoenix", "phx_reply"]:
        frames.append(frame)
    return frames


@pytest.mark.parametrize("remover", ["owner agent", "user"])
async def test_a_removed_agent_gets_nothing_more_from_that_room(
    remover: str, emu: Emulator, human: AsyncRestClient
) -> None:
    owner, gone, newcomer = [await register(human, n) for n in ("Owner", "Gone", "New")]
    async with raw_client(emu.rest_url, owner.key) as as_owner:
        made = await as_owner.post("/api/v1/agent/chats", json={"chat": {"title": "r"}})
        room = made.json()["data"]["id"]
        people = f"/api/v1/agent/chats/{room}/participants"
        added = await as_owner.post(people, json={"participant": {"participant_id": gone.id}})
        assert added.status_code == 201, added.text
        topics = (f"chat_room:{room}", f"room_participants:{room}")
        async with peer(emu, gone.key) as b, peer(emu, owner.key) as a:
            joined = {topic: (await b.join(topic))[0] for topic in topics}
            await a.join(f"room_participants:{room}")
            if remover == "user":
                await human.human_api_participants.remove_my_chat_participant(
                    chat_id=room, id=gone.id
                )
            else:
                removed = await as_owner.delete(f"{people}/{gone.id}")
                assert removed.status_code == 200, removed.text
            # It hears of its own removal, and that is the last it hears of the room.
            assert [(f[2], f[3]) for f in await _drain(b)] == [(topics[1], "participant_removed")]

            # The room goes on: a newcomer joins, a message is posted, it is renamed.
            again = await as_owner.post(
                people, json={"participant": {"participant_id": newcomer.id}}
            )
            assert again.status_code == 201, again.text
            post = {"message": {"content": "@New hi", "mentions": [{"id": newcomer.id}]}}
            sent = await as_owner.post(f"/api/v1/agent/chats/{room}/messages", json=post)
            assert sent.status_code == 201, sent.text
            renamed = await as_owner.patch(
                f"/api/v1/agent/chats/{room}", json={"chat": {"title": "s"}}
            )
            assert renamed.status_code == 200, renamed.text
            heard = [f[3] for f in await _drain(a)]  # the room's pushes did go out
            assert heard == ["participant_removed", "participant_added"]
            assert [f for f in await _drain(b) if f[2] in topics] == []
            for topic in topics:  # its leave is answered; it cannot come back on its own
                ref = await b.send(joined[topic], topic, "phx_leave")
                assert await b.recv() == [joined[topic], ref, topic, "phx_reply", OK]
                _, reply = await b.join(topic)
                assert reply[4] == {"status": "error", "response": {"reason": "unauthorized"}}
