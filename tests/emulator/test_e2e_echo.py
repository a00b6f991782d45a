"""End to end: the real echo agent (its own locked env) against the emulator.

Each mode mirrors how people use it: the agent already in the room when it starts, added
after it started (the `room_added` path), and a backlog message sent before it starts.
A human WebSocket observer checks created -> processing -> reply -> processed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from band.client.rest import AsyncRestClient
from websockets.asyncio.client import connect

from bandkit.emulator.server import Emulator
from tests.emulator.conftest import StartEmulator
from tests.emulator.support import (
    USER_KEY,
    AgentProcess,
    Observer,
    Seen,
    add,
    create_room,
    human_client,
    mention,
    register,
)
from tests.support.wait import until


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
    await until(
        lambda: "processed" in obs.status_of(message_id, agent_id),
        timeout=15,
        what="processed status",
    )

    def first(event: str, match: Callable[[Seen], bool]) -> int:
        return next(i for i, s in enumerate(obs.seen) if s.event == event and match(s))

    def status_is(status: str) -> Callable[[Seen], bool]:
        def match(s: Seen) -> bool:
            delivery = (s.payload.metadata.delivery_status or {}).get(agent_id, {})
            return bool(s.payload.id == message_id and delivery.get("status") == status)

        return match

    created = first("message_created", lambda s: s.payload.id == message_id)
    processing = first("message_updated", status_is("processing"))
    replied = first("message_created", lambda s: s.payload.id == reply.payload.id)
    processed = first("message_updated", status_is("processed"))
    assert created < processing < replied < processed
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
        await until(_online(emu, agent.id), timeout=60, what="agent online")
        message_id = await mention(human, room, agent, "hello before")
        await _assert_round_trip(obs, human, room, agent.id, message_id, "hello before")
    _assert_clean(process)


async def test_agent_added_after_start_answers(
    emu: Emulator, human: AsyncRestClient, echo_agents: Callable[..., AgentProcess]
) -> None:
    agent = await register(human)
    room = await create_room(human)
    process = echo_agents(agent, emu.rest_url, emu.ws_url)
    await until(_online(emu, agent.id), timeout=60, what="agent online")
    async with Observer(emu.ws_url) as obs:
        await obs.watch(room)
        await add(human, room, agent.id)

        def joined() -> bool:
            assert emu.platform is not None
            sock = emu.platform.broker.agent_sockets.get(agent.id)
            return sock is not None and f"chat_room:{room}" in sock.topics

        await until(joined, timeout=20, what="agent joined the room after room_added")
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


async def test_echo_over_tls_trusting_the_printed_ca(
    start_emulator: StartEmulator,
    echo_agents: Callable[..., AgentProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    emu: Emulator = await start_emulator(tls=True, tls_dir=tmp_path / "tls")
    assert emu.ca_file is not None
    assert emu.rest_url.startswith("https://")
    monkeypatch.setenv("SSL_CERT_FILE", str(emu.ca_file))  # how clients trust it
    human = human_client(emu.rest_url)
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    async with Observer(emu.ws_url) as obs:
        await obs.watch(room)
        process = echo_agents(agent, emu.rest_url, emu.ws_url, SSL_CERT_FILE=str(emu.ca_file))
        message_id = await mention(human, room, agent, "over tls")
        await _assert_round_trip(obs, human, room, agent.id, message_id, "over tls")
    _assert_clean(process)


async def test_a_newer_connection_supersedes_the_running_agent(
    emu: Emulator, human: AsyncRestClient, echo_agents: Callable[..., AgentProcess]
) -> None:
    agent = await register(human)
    process = echo_agents(agent, emu.rest_url, emu.ws_url)
    await until(_online(emu, agent.id), timeout=60, what="agent online")
    headers = {"x-api-key": agent.key}
    async with connect(f"{emu.ws_url}?vsn=2.0.0&agent_id={agent.id}", additional_headers=headers):
        assert process.proc is not None
        await until(
            lambda: process.proc is not None and process.proc.poll() is not None,
            timeout=30,
            what="the superseded agent to stop",
        )
    assert "supersede" in process.log().lower()
    assert "Traceback" not in process.log()
