"""End to end: the real echo agent (its own locked env) against the emulator.

Each mode mirrors how people use it: the agent already in the room when it starts, added
after it started (the `room_added` path), and a backlog message sent before it starts.
A human WebSocket observer checks created -> processing -> reply -> processed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from band.client.rest import AsyncRestClient

from bandkit.emulator import Emulator
from tests.emulator.support import (
    USER_KEY,
    AgentProcess,
    Observer,
    add,
    create_room,
    eventually,
    mention,
    register,
)

pytestmark = pytest.mark.slow


def _online(emu: Emulator, agent_id: str) -> Callable[[], bool]:
    def check() -> bool:
        assert emu.platform is not None
        sock = emu.platform.broker.agent_sockets.get(agent_id)
        return sock is not None and f"agent_rooms:{agent_id}" in sock.topics

    return check


def _assert_clean(process: AgentProcess) -> None:
    log = process.log()
    assert USER_KEY not in log
    assert process.agent.key not in log
    assert "Traceback" not in log, log[-3000:]


async def _assert_round_trip(
    obs: Observer, human: AsyncRestClient, room: str, agent_id: str, message_id: str, text: str
) -> None:
    reply = await obs.wait_reply(text)
    assert reply.payload.sender_id == agent_id
    assert reply.payload.sender_type == "Agent"
    await eventually(
        lambda: "processed" in obs.status_of(message_id, agent_id),
        timeout=15,
        what="processed status",
    )
    statuses = obs.status_of(message_id, agent_id)
    assert statuses.index("processing") < statuses.index("processed")
    order = [s.payload.id for s in obs.seen if s.event == "message_created"]
    assert order.index(message_id) < order.index(reply.payload.id)
    listed = await human.human_api_messages.list_my_chat_messages(chat_id=room)
    assert listed.data[0].content.startswith("echo: ")  # newest first
    assert listed.data[0].content.endswith(text)


async def test_agent_added_before_start_answers(
    emu: Emulator, human: AsyncRestClient, echo_agents: Callable[..., AgentProcess]
) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    async with Observer(emu.ws_url) as obs:
        await obs.watch(room)
        process = echo_agents(agent, emu.rest_url, emu.ws_url)
        await eventually(_online(emu, agent.id), timeout=60, what="agent online")
        message_id = await mention(human, room, agent, "hello before")
        await _assert_round_trip(obs, human, room, agent.id, message_id, "hello before")
    _assert_clean(process)


async def test_agent_added_after_start_answers(
    emu: Emulator, human: AsyncRestClient, echo_agents: Callable[..., AgentProcess]
) -> None:
    agent = await register(human)
    room = await create_room(human)
    process = echo_agents(agent, emu.rest_url, emu.ws_url)
    await eventually(_online(emu, agent.id), timeout=60, what="agent online")
    async with Observer(emu.ws_url) as obs:
        await obs.watch(room)
        await add(human, room, agent.id)

        def joined() -> bool:
            assert emu.platform is not None
            sock = emu.platform.broker.agent_sockets.get(agent.id)
            return sock is not None and f"chat_room:{room}" in sock.topics

        await eventually(joined, timeout=20, what="agent joined the room after room_added")
        message_id = await mention(human, room, agent, "hello after")
        await _assert_round_trip(obs, human, room, agent.id, message_id, "hello after")
    _assert_clean(process)


async def test_backlog_message_sent_before_start_is_answered(
    emu: Emulator, human: AsyncRestClient, echo_agents: Callable[..., AgentProcess]
) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    async with Observer(emu.ws_url) as obs:
        await obs.watch(room)
        message_id = await mention(human, room, agent, "waiting for you")
        process = echo_agents(agent, emu.rest_url, emu.ws_url)
        await _assert_round_trip(obs, human, room, agent.id, message_id, "waiting for you")
    _assert_clean(process)
