"""Proving an agent is up: its home room, "connected", and a ping that gets a reply.

Every provisioned agent gets one home room titled `kit: <sandbox name>`, recorded in the
provisioning manifest before it is created (so `kit.unprovision` removes it) and reused
by later runs: `kit.provision` waits there until the platform lists the agent as online
(`GET /me/chats/{R}/participants`, `online`), and `kit.ping` mentions it there with a
marker and waits for a reply that carries the marker back.

All waits poll the human API with a deadline (`POLL_S` apart); nothing sleeps for luck.
Messages never contain a key.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from band_rest import (
    AsyncRestClient,
    ChatMessageRequest,
    ChatMessageRequestMentionsItem,
    ParticipantRequest,
)
from band_rest.core.api_error import ApiError

from bandkit.errors import BandkitError
from bandkit.kit.platform_api import NO_RETRY, client
from bandkit.kit.rooms import create_room, room_key
from bandkit.manifest import Kind, Manifest

POLL_S = 0.2
ALIVE_EVERY_S = 2.0  # asking the runtime runs its CLI (sbx, docker): not every poll
PROGRESS_EVERY_S = 5.0
CONNECT_TIMEOUT_S = 60.0
PING_TIMEOUT_S = 30.0
Progress = Callable[[str], None]
T = TypeVar("T")


class AgentCheckError(BandkitError):
    """The agent did not connect or did not answer in time; the message says what next."""


def home_title(name: str) -> str:
    return f"kit: {name}"


def recorded_ids(manifest_path: Path, name: str) -> tuple[str, str]:
    """(home room id, agent id) that the provision manifest at `manifest_path` records for
    `name` (read without locking: a reader beside the kit's own commands)."""
    resources = Manifest.read(manifest_path)
    title = home_title(name)
    room = next(
        (
            r.details.get("id", "")
            for r in resources
            if r.kind is Kind.ROOM and r.details.get("title") == title
        ),
        "",
    )
    agent = next((r.details.get("id", "") for r in resources if r.kind is Kind.AGENT), "")
    if not room or not agent:
        raise AgentCheckError(f"{manifest_path} records no home room and agent for {name!r}")
    return room, agent


def home_room(
    manifest: Manifest,
    *,
    api_key: str,
    rest_url: str,
    name: str,
    agent_id: str,
    platform: Mapping[str, str] | None = None,
) -> str:
    """The agent's home room id: the recorded one, else a new one (recorded first, with
    what `platform` says about the platform it is on). A room recorded on this platform
    under another URL (it moved ports: same `platform` id) is the same room."""
    title = home_title(name)
    entry = manifest.find(Kind.ROOM, room_key(rest_url, title))
    platform_id = (platform or {}).get("platform", "")
    if entry is None and platform_id:
        entry = next(
            (
                r
                for r in manifest.resources
                if r.kind is Kind.ROOM
                and r.details.get("title") == title
                and r.details.get("platform") == platform_id
            ),
            None,
        )
    room_id = entry.details.get("id", "") if entry is not None else ""
    if not room_id:
        if entry is not None:  # recorded by a run that stopped before the answer
            manifest.forget(entry)
        room_id = create_room(
            manifest, api_key=api_key, rest_url=rest_url, title=title, platform=platform
        )
    asyncio.run(_ensure_member(api_key, rest_url, room_id, agent_id))
    return room_id


async def _ensure_member(api_key: str, rest_url: str, room_id: str, agent_id: str) -> None:
    async with client(api_key, rest_url) as rest:
        listed = await rest.human_api_participants.list_my_chat_participants(
            chat_id=room_id, request_options=NO_RETRY
        )
        if any(str(p.id) == agent_id for p in listed.data):
            return
        await rest.human_api_participants.add_my_chat_participant(
            chat_id=room_id,
            participant=ParticipantRequest(participant_id=agent_id, role="member"),
            request_options=NO_RETRY,
        )


def _once(api_key: str, rest_url: str, call: Callable[[AsyncRestClient], Awaitable[T]]) -> T:
    """One call through a client of its own (a wait polls through one client instead)."""

    async def run() -> T:
        async with client(api_key, rest_url) as rest:
            return await call(rest)

    return asyncio.run(run())


async def _online(rest: AsyncRestClient, room_id: str, agent_id: str) -> bool:
    listed = await rest.human_api_participants.list_my_chat_participants(
        chat_id=room_id, request_options=NO_RETRY
    )
    return any(str(p.id) == agent_id and bool(getattr(p, "online", False)) for p in listed.data)


def is_online(*, api_key: str, rest_url: str, room_id: str, agent_id: str) -> bool:
    """Whether the platform lists the agent online in its home room now (one call)."""
    return _once(api_key, rest_url, lambda rest: _online(rest, room_id, agent_id))


def wait_online(
    *,
    api_key: str,
    rest_url: str,
    room_id: str,
    agent_id: str,
    timeout_s: float = CONNECT_TIMEOUT_S,
    progress: Progress = lambda _line: None,
    alive: Callable[[], bool] = lambda: True,
) -> float:
    """Seconds until the platform lists the agent online; AgentCheckError at the deadline.

    `alive` lets the caller stop early when the sandbox already died (no point waiting);
    it is asked every `ALIVE_EVERY_S` and at the deadline, not at every poll. One client
    polls for the whole wait (a client per poll costs a TLS context each: the CPU of a
    fleet's start on a small machine).
    """

    async def wait() -> float:
        started = time.monotonic()
        deadline = started + timeout_s
        next_note = started + PROGRESS_EVERY_S
        next_alive = started + ALIVE_EVERY_S
        async with client(api_key, rest_url) as rest:
            while True:
                try:
                    if await _online(rest, room_id, agent_id):
                        return time.monotonic() - started
                except ApiError as exc:
                    raise AgentCheckError(
                        f"the platform answered HTTP {exc.status_code} while checking agent "
                        f"{agent_id}'s connection"
                    ) from None
                now = time.monotonic()
                if now >= min(next_alive, deadline):
                    if not alive():
                        raise AgentCheckError(
                            f"the sandbox stopped before agent {agent_id} connected"
                        )
                    next_alive = time.monotonic() + ALIVE_EVERY_S
                if now >= deadline:
                    raise AgentCheckError(
                        f"agent {agent_id} did not connect to {rest_url} within {timeout_s:.0f}s"
                    )
                if now >= next_note:
                    progress(f"waiting for agent {agent_id} to connect ({now - started:.0f}s)")
                    next_note = now + PROGRESS_EVERY_S
                await asyncio.sleep(POLL_S)

    return asyncio.run(wait())


@dataclass(frozen=True)
class Pong:
    reply: str
    seconds: float


async def send(
    rest: AsyncRestClient, room_id: str, agent_id: str, agent_name: str, text: str
) -> str:
    """Post `@agent_name text` in the room through `rest`, mentioning the agent; the
    message id."""
    sent = await rest.human_api_messages.send_my_chat_message(
        chat_id=room_id,
        message=ChatMessageRequest(
            content=f"@{agent_name} {text}",
            mentions=[ChatMessageRequestMentionsItem(id=agent_id, name=agent_name)],
        ),
        request_options=NO_RETRY,
    )
    return str(sent.data.id)


async def _reply(rest: AsyncRestClient, room_id: str, agent_id: str, token: str) -> str:
    listed = await rest.human_api_messages.list_my_chat_messages(
        chat_id=room_id, limit=50, request_options=NO_RETRY
    )
    for message in listed.data:
        content = str(getattr(message, "content", "") or "")
        if str(getattr(message, "sender_id", "")) == agent_id and token in content:
            return content
    return ""


def mention(
    *, api_key: str, rest_url: str, room_id: str, agent_id: str, agent_name: str, text: str
) -> None:
    """Post `@agent_name text` in the room, mentioning the agent (the human API)."""
    _once(api_key, rest_url, lambda rest: send(rest, room_id, agent_id, agent_name, text))


def reply_to(*, api_key: str, rest_url: str, room_id: str, agent_id: str, token: str) -> str:
    """The agent's latest message in the room that carries `token` ("" while none)."""
    return _once(api_key, rest_url, lambda rest: _reply(rest, room_id, agent_id, token))


def ping(
    *,
    api_key: str,
    rest_url: str,
    room_id: str,
    agent_id: str,
    agent_name: str,
    timeout_s: float = PING_TIMEOUT_S,
) -> Pong:
    """Mention the agent with `ping:<token>` and wait for its message carrying the token
    (one client for the mention and every poll)."""
    token = secrets.token_hex(6)

    async def wait() -> Pong:
        started = time.monotonic()
        deadline = started + timeout_s
        async with client(api_key, rest_url) as rest:
            await send(rest, room_id, agent_id, agent_name, f"ping:{token}")
            while True:
                reply = await _reply(rest, room_id, agent_id, token)
                if reply:
                    return Pong(reply, time.monotonic() - started)
                if time.monotonic() >= deadline:
                    raise AgentCheckError(
                        f"agent {agent_id} did not answer ping:{token} within {timeout_s:.0f}s"
                    )
                await asyncio.sleep(POLL_S)

    return asyncio.run(wait())
