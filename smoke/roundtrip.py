"""The human side of a probe: a mention carrying `marker:<token>` (12 hex) sent over REST,
the agent's `sandbox-ack:<token>` seen by a human WebSocket observer (the SDK's own
`WebSocketClient` with the user key). The REST message list is polled as a fallback
every `FALLBACK_POLL_S` (a reply the observer missed, e.g. while its own socket
reconnects); `Ack.via` says which one saw the reply. Also `online` (the platform's
participant list) and `run_async`, how the synchronous orchestration runs these steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from bandkit.kit.agent_check import send
from bandkit.kit.platform_api import NO_RETRY, client
from smoke.target import Target

TOKEN_BYTES = 6  # 12 hex characters
ACK_PREFIX = "sandbox-ack:"
MARKER_PREFIX = "marker:"
REPLY_TIMEOUT_S = 30.0
FALLBACK_POLL_S = 2.0


T = TypeVar("T")


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """Run one async step to completion from the (synchronous) orchestration."""

    async def main() -> T:
        return await make()

    return asyncio.run(main())


async def send_marker(target: Target, room: str, agent_id: str, name: str, token: str) -> str:
    """Mention the agent with `marker:<token>` over REST; the message id."""
    async with client(target.user_key, target.rest_url) as rest:
        return await send(rest, room, agent_id, name, f"smoke probe {MARKER_PREFIX}{token}")


async def find_ack(
    target: Target, room: str, agent_id: str, token: str
) -> tuple[bool, datetime | None]:
    """(found, the platform's timestamp of it) for the agent's ack of `token` (REST)."""
    async with client(target.user_key, target.rest_url) as rest:
        listed = await rest.human_api_messages.list_my_chat_messages(
            chat_id=room, limit=50, request_options=NO_RETRY
        )
    wanted = f"{ACK_PREFIX}{token}"
    for m in listed.data:
        if str(getattr(m, "sender_id", "")) == agent_id and wanted in str(m.content or ""):
            at = getattr(m, "inserted_at", None)
            return True, at if isinstance(at, datetime) and at.tzinfo else None
    return False, None


async def ack_listed(target: Target, room: str, agent_id: str, token: str) -> bool:
    """True when the room's latest messages hold the agent's ack for `token` (REST)."""
    found, _ = await find_ack(target, room, agent_id, token)
    return found


async def online(target: Target, room: str, agent_id: str) -> bool:
    """Whether the platform lists the agent online in `room`."""
    async with client(target.user_key, target.rest_url) as rest:
        listed = await rest.human_api_participants.list_my_chat_participants(
            chat_id=room, request_options=NO_RETRY
        )
    return any(str(p.id) == agent_id and bool(getattr(p, "online", False)) for p in listed.data)


@dataclass
class Observer:
    """A human WebSocket observer of one room: the SDK's `WebSocketClient`, user key."""

    target: Target
    room: str
    agent_id: str
    acks: dict[str, float] = field(default_factory=dict)  # token -> monotonic time seen
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _client: Any = None

    async def __aenter__(self) -> Observer:
        from band.client.streaming import WebSocketClient

        self._client = WebSocketClient(self.target.ws_url, self.target.user_key)
        await self._client.__aenter__()
        try:
            await self._client.join_chat_room_channel(self.room, self._created, self._updated)
        except BaseException:
            await self._client.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._client.__aexit__(None, None, None)

    async def _updated(self, payload: Any) -> None:
        """Delivery-status updates: not needed, taken so the SDK does not warn."""

    async def _created(self, payload: Any) -> None:
        content = str(getattr(payload, "content", "") or "")
        if str(getattr(payload, "sender_id", "")) != self.agent_id:
            return
        for word in content.split():
            if word.startswith(ACK_PREFIX):
                self.acks.setdefault(word.removeprefix(ACK_PREFIX), time.monotonic())
        self._changed.set()

    async def wait(self, token: str, timeout_s: float) -> tuple[float, str]:
        """(monotonic time the ack was seen, "WebSocket" or "polling"); TimeoutError."""
        deadline = time.monotonic() + timeout_s
        next_poll = time.monotonic() + FALLBACK_POLL_S
        while token not in self.acks:
            now = time.monotonic()
            if now >= next_poll:
                if await ack_listed(self.target, self.room, self.agent_id, token):
                    return time.monotonic(), "polling (the observer missed it)"
                next_poll = time.monotonic() + FALLBACK_POLL_S
            if now >= deadline:
                if await ack_listed(self.target, self.room, self.agent_id, token):
                    return time.monotonic(), "polling (the observer missed it)"
                raise TimeoutError(f"no {ACK_PREFIX}{token} within {timeout_s:.0f}s")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(next_poll, deadline) - now)
        return self.acks[token], "WebSocket"


@dataclass(frozen=True)
class Ack:
    token: str
    seconds: float  # from the send (round trip) or from `since` (await_ack)
    via: str

    def describe(self, what: str) -> str:
        return f"{what} {ACK_PREFIX}{self.token} in {self.seconds:.2f}s over {self.via}"


async def round_trip(
    target: Target, room: str, agent_id: str, name: str, *, timeout_s: float = REPLY_TIMEOUT_S
) -> Ack:
    """Observer joins, marker sent, the agent's ack awaited; TimeoutError if none."""
    token = new_token()
    async with Observer(target, room, agent_id) as observer:
        started = time.monotonic()
        await send_marker(target, room, agent_id, name, token)
        seen, via = await observer.wait(token, timeout_s)
    return Ack(token, seen - started, via)


async def await_ack(
    target: Target,
    room: str,
    agent_id: str,
    token: str,
    *,
    since: float,
    since_wall: datetime,
    timeout_s: float,
) -> Ack:
    """The ack of a marker sent earlier (during an outage); seconds counted from `since`
    (monotonic; `since_wall` is the same moment by the wall clock).

    When the agent answered before the observer had joined, the reply is read over REST
    and timed by the platform's own timestamp of it (the local platform shares this
    host's clock)."""
    async with Observer(target, room, agent_id) as observer:
        found, at = await find_ack(target, room, agent_id, token)
        if found:  # answered before the observer joined
            if at is not None:
                seconds = (at - since_wall).total_seconds()
                return Ack(token, seconds, "REST (before the observer joined; platform time)")
            return Ack(token, time.monotonic() - since, "REST (before the observer joined)")
        seen, via = await observer.wait(token, timeout_s)
    return Ack(token, seen - since, via)
