"""Shared builders for the emulator tests: clients, an observer, the echo agent process,
the error-shape check and a raw Phoenix Channels peer.

Everything here drives real parts: the real `band_rest` client, the SDK's own
`WebSocketClient` as the human observer, and the real echo agent from
`docker/band_python_kit/echo-agent` run from its own locked environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from band.client.rest import AsyncRestClient
from band.client.streaming import WebSocketClient
from band.runtime.tools import AgentTools
from band_rest import AgentRegisterRequest, ChatMessageRequest, ChatRoomRequest, ParticipantRequest
from band_rest.types import ChatMessageRequestMentionsItem
from websockets.asyncio.client import ClientConnection, connect

from bandkit.emulator.server import Emulator

REPO_ROOT = Path(__file__).resolve().parents[2]
# Canary secrets: tests grep every output for them.
USER_KEY = "canary-user-key-9d41f0"
# A well-formed id that names nothing: route paths, and lookups that must miss.
ROOM = "00000000-0000-0000-0000-000000000001"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.asynccontextmanager
async def chromium(*extra_args: str) -> AsyncIterator[Any]:
    """Headless Debian Chromium through playwright (the `browser` group; `nox -s tests`).

    Without playwright the test is skipped, except in CI, where that is a failure.
    """
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed: run browser tests with `uv run nox -s e2e`")
    assert CHROMIUM.exists(), "apt-get install chromium (the tests lane installs it in CI)"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *extra_args]
        )
        try:
            yield browser
        finally:
            await browser.close()


def human_client(rest_url: str, key: str = USER_KEY) -> AsyncRestClient:
    return AsyncRestClient(api_key=key, base_url=rest_url)


def raw_client(rest_url: str, key: str | None = USER_KEY) -> httpx.AsyncClient:
    headers = {"x-api-key": key} if key is not None else {}
    return httpx.AsyncClient(base_url=rest_url, headers=headers, timeout=10)


async def login_link(rest_url: str, key: str = USER_KEY) -> str:
    """A fresh one-time room-page login link, from the control API (as `platform.status`)."""
    async with raw_client(rest_url, key) as client:
        response = await client.post("/_emulator/login-link")
    assert response.status_code == 201, response.text
    url: str = response.json()["data"]["url"]
    return url


def token_of(link: str) -> str:
    """The token in a login link's fragment (`.../login#token=...[&next=...]`)."""
    base, _, fragment = link.partition("#")
    assert base.endswith("/login"), link
    assert fragment.startswith("token="), link
    return fragment.removeprefix("token=").split("&", 1)[0]


async def sign_in(rest_url: str) -> str:
    """Do what the login page does (post the link's token) and return the `Cookie` header."""
    token = token_of(await login_link(rest_url))
    async with httpx.AsyncClient(base_url=rest_url, timeout=10) as client:
        response = await client.post("/login", data={"token": token})
    assert response.status_code == 303, response.text
    name, _, rest = response.headers["set-cookie"].partition("=")
    return f"{name}={rest.split(';', 1)[0]}"


def page_client(rest_url: str, cookie: str | None, **headers: str) -> httpx.AsyncClient:
    """A browser-like client: the session cookie, plus what the room page's script adds."""
    sent = {"cookie": cookie} if cookie else {}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    return httpx.AsyncClient(base_url=rest_url, headers=sent, timeout=10)


PAGE_CALL = {"x_bandkit_page": "1", "sec_fetch_site": "same-origin"}


@dataclass
class Registered:
    id: str
    key: str
    name: str


async def assert_refuses_wrong_keys(rest_url: str, method: str, path: str, other_kind: str) -> None:
    """A route answers 401 without a key and with a bad one, 403 with the other kind's key."""
    for key, status, code in (
        (None, 401, "unauthorized"),
        ("not-a-key", 401, "unauthorized"),
        (other_kind, 403, "forbidden"),
    ):
        async with raw_client(rest_url, key) as client:
            response = await client.request(method, path, json={})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["code"] == code
        assert error["message"]
        assert error["request_id"]


async def register(human: AsyncRestClient, name: str = "Echo Bot") -> Registered:
    response = await human.human_api_agents.register_my_agent(
        agent=AgentRegisterRequest(name=name, description=f"{name} for tests")
    )
    return Registered(response.data.agent.id, response.data.credentials.api_key, name)


async def create_room(human: AsyncRestClient, title: str = "test room") -> str:
    room = await human.human_api_chats.create_my_chat_room(chat=ChatRoomRequest(title=title))
    return room.data.id


async def add(human: AsyncRestClient, room_id: str, agent_id: str) -> None:
    await human.human_api_participants.add_my_chat_participant(
        chat_id=room_id, participant=ParticipantRequest(participant_id=agent_id, role="member")
    )


async def mention(human: AsyncRestClient, room_id: str, agent: Registered, text: str) -> str:
    sent = await human.human_api_messages.send_my_chat_message(
        chat_id=room_id,
        message=ChatMessageRequest(
            content=f"@{agent.name} {text}",
            mentions=[ChatMessageRequestMentionsItem(id=agent.id, name=agent.name)],
        ),
    )
    return sent.data.id


@dataclass
class Seat:
    """One registered agent in a room the user created, with the SDK's own tools."""

    agent: Registered
    room: str
    rest: AsyncRestClient
    tools: AgentTools


async def seat(rest_url: str, human: AsyncRestClient, name: str, room: str | None = None) -> Seat:
    """Register `name`, add it to `room` (a new one by default), and give it `AgentTools`."""
    agent = await register(human, name)
    room = room or await create_room(human)
    await add(human, room, agent.id)
    rest = AsyncRestClient(api_key=agent.key, base_url=rest_url)
    return Seat(agent, room, rest, AgentTools(room, rest, agent_id=agent.id))


async def with_participants(s: Seat) -> AgentTools:
    """`s.tools` again, knowing the room's participants (what mention resolution needs)."""
    listed = await s.rest.agent_api_participants.list_agent_chat_participants(s.room)
    people = [p.model_dump() for p in listed.data]
    s.tools = AgentTools(s.room, s.rest, people, agent_id=s.agent.id)
    return s.tools


@dataclass
class Seen:
    event: str
    payload: Any


@dataclass
class Observer:
    """A human WebSocket observer: the SDK's `WebSocketClient` with the user key."""

    ws_url: str
    key: str = USER_KEY
    seen: list[Seen] = field(default_factory=list)
    _client: WebSocketClient | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __aenter__(self) -> Observer:
        self._client = WebSocketClient(self.ws_url, self.key)
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._client is not None
        await self._client.__aexit__(None, None, None)

    async def watch(self, room_id: str) -> None:
        assert self._client is not None

        async def created(payload: Any) -> None:
            self._record("message_created", payload)

        async def updated(payload: Any) -> None:
            self._record("message_updated", payload)

        await self._client.join_chat_room_channel(room_id, created, updated)

    def _record(self, event: str, payload: Any) -> None:
        self.seen.append(Seen(event, payload))
        self._changed.set()

    def reply_to(self, text: str) -> Seen | None:
        for item in self.seen:
            content = item.payload.content if item.event == "message_created" else ""
            if content.startswith("echo: ") and content.endswith(text):
                return item
        return None

    def status_of(self, message_id: str, agent_id: str) -> list[str]:
        """Delivery statuses this observer saw for one message and recipient, in order."""
        out = []
        for item in self.seen:
            if item.event == "message_updated" and item.payload.id == message_id:
                status = (item.payload.metadata.delivery_status or {}).get(agent_id, {})
                out.append(status.get("status"))
        return out

    async def wait_reply(self, text: str, timeout: float = 30.0) -> Seen:
        deadline = time.monotonic() + timeout
        while (found := self.reply_to(text)) is None:
            self._changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no reply 'echo: {text}' within {timeout:.0f}s")
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                continue
        return found


@dataclass
class AgentProcess:
    """The real echo agent (`main.py`) as a subprocess of its own locked interpreter."""

    workspace: Path  # a synced copy of the echo-agent workspace
    agent: Registered
    rest_url: str
    ws_url: str
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "BAND_AGENT_ID": self.agent.id,
            "BAND_API_KEY": self.agent.key,
            "BAND_REST_URL": self.rest_url,
            "BAND_WS_URL": self.ws_url,
            "BAND_LOG_LEVEL": "INFO",
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [str(self.workspace / ".venv" / "bin" / "python"), str(self.workspace / "main.py")],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return self

    def signal(self, signum: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 25.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@dataclass
class EmulatorProcess:
    """`python -m bandkit.emulator` as a real subprocess (restart drills, CLI tests)."""

    args: list[str]
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    rest_url: str = ""
    ws_url: str = ""
    banner: list[str] = field(default_factory=list)

    async def start(self, timeout: float = 30.0) -> EmulatorProcess:
        import sys

        log = self.log_path.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bandkit.emulator",
            *self.args,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            cwd=REPO_ROOT,
        )
        log.close()
        assert self.proc.stdout is not None
        self.banner = []
        async with asyncio.timeout(timeout):
            while not self.banner or not self.banner[-1].startswith("Ctrl-C"):
                line = await self.proc.stdout.readline()
                if not line:
                    raise AssertionError(f"emulator exited early:\n{self.log()}")
                self.banner.append(line.decode().rstrip("\n"))
        self.rest_url, self.ws_url = self.banner[0], self.banner[1]
        return self

    async def stop(self, signum: signal.Signals = signal.SIGTERM, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signum)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode is not None
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["request_id"], str)
    assert error["request_id"]
    return dict(error)


# Phoenix Channels V2 frames, with a raw `websockets` client.
Frame = list[Any]


class Peer:
    """A raw V2 client: send frames with fresh refs, read frames with a deadline."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ref = 0

    def ref(self) -> str:
        self._ref += 1
        return str(self._ref)

    async def send(self, join_ref: str | None, topic: str, event: str, payload: Any = None) -> str:
        ref = self.ref()
        await self.ws.send(json.dumps([join_ref, ref, topic, event, payload or {}]))
        return ref

    async def recv(self, timeout: float = 5.0) -> Frame:
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        frame = json.loads(raw)
        assert isinstance(frame, list)
        assert len(frame) == 5
        return frame

    async def join(self, topic: str) -> tuple[str, Frame]:
        join_ref = self.ref()
        await self.ws.send(json.dumps([join_ref, join_ref, topic, "phx_join", {}]))
        reply = await self.recv()
        assert reply[:4] == [join_ref, join_ref, topic, "phx_reply"]
        return join_ref, reply

    async def heartbeat(self) -> Frame:
        ref = await self.send(None, "phoenix", "heartbeat")
        reply = await self.recv()
        assert reply == [None, ref, "phoenix", "phx_reply", {"status": "ok", "response": {}}]
        return reply

    async def expect_quiet(self) -> None:
        """Nothing was queued before now: the next frame is our heartbeat's reply."""
        await self.heartbeat()


@contextlib.asynccontextmanager
async def peer(emu: Emulator, key: str, query: str = "vsn=2.0.0") -> AsyncIterator[Peer]:
    async with connect(f"{emu.ws_url}?{query}", additional_headers={"x-api-key": key}) as ws:
        yield Peer(ws)
