"""When to read the room: a push over the user WebSocket, or a poll timer when it is down.

``RoomFeed`` joins the room's ``chat_room:<id>`` channel with the SDK's own
``WebSocketClient`` (the presenter's key) and wakes the conductor on every
``message_created`` push, so the conductor reacts within a second. The conductor then reads
the room over REST (one code path for every message, deduplicated by id), so a push only
says "look now".

Fallback: when the socket cannot be opened, or drops, the feed says so on the transcript
and ``wait`` says "read now" every ``poll_interval_s`` instead (``DEMO_POLL_INTERVAL_S``,
see ``settings``; a poke still reads at once); the SDK client reconnects on its own, and
the feed says when pushes are back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, Protocol

CONNECT_TIMEOUT_S: Final = 10.0
POLL_INTERVAL_S: Final = 1.0


class SocketClient(Protocol):
    """The part of ``band.client.streaming.WebSocketClient`` the feed uses."""

    async def __aenter__(self) -> Any: ...
    async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> Any: ...
    async def join_chat_room_channel(self, chat_room_id: str, on_message_created: Any) -> Any: ...


SocketFactory = Callable[..., SocketClient]


def sdk_socket(ws_url: str, api_key: str, **callbacks: Any) -> SocketClient:
    from band.client.streaming import WebSocketClient

    client: SocketClient = WebSocketClient(ws_url, api_key, **callbacks)
    return client


class RoomFeed:
    """Wakes the conductor when the room may have changed."""

    def __init__(
        self,
        ws_url: str,
        api_key: str,
        room_id: str,
        *,
        log: Callable[[str], None],
        poll_interval_s: float = POLL_INTERVAL_S,
        factory: SocketFactory = sdk_socket,
    ) -> None:
        self._args = (ws_url, api_key)
        self._room_id = room_id
        self._log = log
        self.poll_interval_s = poll_interval_s
        self._factory = factory
        self._client: SocketClient | None = None
        self._changed = asyncio.Event()
        self._closing = False
        self.live = False
        self.drops = 0  # how many times the feed fell back to polling
        self._next_poll = 0.0  # loop time when the next read falls due while polling

    async def start(self) -> None:
        """Open the socket and join the room; on failure, poll (and say so)."""
        client = self._factory(
            *self._args, on_disconnect=self._dropped, on_reconnect=self._restored
        )
        try:
            await asyncio.wait_for(client.__aenter__(), CONNECT_TIMEOUT_S)
            self._client = client
            await asyncio.wait_for(
                client.join_chat_room_channel(self._room_id, self._pushed), CONNECT_TIMEOUT_S
            )
        except Exception as exc:  # any connect or join failure: polling still works
            self._fall_back(f"WebSocket unavailable ({type(exc).__name__})")
            return
        self.live = True
        self._log(
            "observer: following the room over the WebSocket (pushes; polling every "
            f"{self.poll_interval_s:g} s if it drops)"
        )

    async def wait(self, tick_s: float) -> bool:
        """Wait for a push or a poke (at most ``tick_s``, and while polling at most until
        the next poll is due).

        True when the room should be read now: a push or a poke came, or (polling) a poll
        interval has passed since the last read this feed asked for.
        """
        loop = asyncio.get_running_loop()
        timeout = tick_s if self.live else max(0.0, min(tick_s, self._next_poll - loop.time()))
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            if self.live or loop.time() < self._next_poll:
                return False
        self._changed.clear()
        self._next_poll = loop.time() + self.poll_interval_s
        return True

    def poke(self) -> None:
        """Ask for a read at the next ``wait`` (the conductor just posted)."""
        self._changed.set()

    async def close(self) -> None:
        self._closing = True
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.__aexit__(None, None, None), CONNECT_TIMEOUT_S)
            except Exception as exc:  # closing a dead socket must not fail the run
                self._log(f"observer: closing the WebSocket failed ({type(exc).__name__})")

    def _fall_back(self, why: str) -> None:
        self.live = False
        self.drops += 1
        self._log(f"observer: {why}; polling the room every {self.poll_interval_s:g} s")
        self._changed.set()

    async def _pushed(self, _payload: object) -> None:
        self._changed.set()

    async def _dropped(self, _error: Exception | None) -> None:
        if self.live and not self._closing:
            self._fall_back("WebSocket dropped")

    async def _restored(self) -> None:
        if not self.live and not self._closing:
            self.live = True
            self._log("observer: WebSocket back; following pushes again")
            self._changed.set()
