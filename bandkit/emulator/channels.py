"""Phoenix Channels V2 over WebSocket: sockets, topic joins, and fan-out of pushes.

One `Socket` per accepted connection: a reader (the ASGI handler) answers heartbeats,
joins and leaves; a writer task drains the socket's outbox so a slow peer never
blocks another, and waits on the pause gate (`faults/pause`). Every push carries the
topic's current join_ref, or the V2 client drops it silently. The `Broker` indexes
sockets by topic and by agent, applies the audience rules of each `Push`, ends the room
channels of an agent removed from the room (`revoke`), and also feeds the live room
pages.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from starlette.websockets import WebSocket

from bandkit.emulator import wire
from bandkit.emulator.ops import Push

log = logging.getLogger("bandkit.emulator.ws")

PAGE_ALL = "*"  # page feed key for the index page


class Kind(StrEnum):
    AGENT = "agent"
    USER = "user"


@dataclass(frozen=True)
class Principal:
    kind: Kind
    id: str


@dataclass(frozen=True)
class _Close:
    code: int
    reason: str


Authorizer = Callable[[Principal, str], str | None]  # topic -> None (ok) or refusal reason


def frame(join_ref: str | None, ref: str | None, topic: str, event: str, payload: Any) -> str:
    return json.dumps([join_ref, ref, topic, event, payload], separators=(",", ":"))


class Socket:
    """One accepted connection and the topics it has joined (topic -> current join_ref)."""

    def __init__(self, websocket: WebSocket, principal: Principal, gate: asyncio.Event) -> None:
        self.websocket = websocket
        self.principal = principal
        self.topics: dict[str, str | None] = {}
        self._gate = gate
        self._outbox: asyncio.Queue[str | _Close] = asyncio.Queue()

    def send(self, text: str) -> None:
        self._outbox.put_nowait(text)

    def close(self, code: int, reason: str = "") -> None:
        """Flush what is queued, then close with `code` (a supersede is sent this way)."""
        self._outbox.put_nowait(_Close(code, reason))

    async def run_writer(self) -> None:
        while True:
            item = await self._outbox.get()
            await self._gate.wait()
            if isinstance(item, _Close):
                await self.websocket.close(item.code, item.reason)
                return
            await self.websocket.send_text(item)


class Broker:
    """Who is connected and subscribed to what; delivers pushes to sockets and pages."""

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate
        self.sockets: set[Socket] = set()
        self.agent_sockets: dict[str, Socket] = {}
        self._by_topic: dict[str, set[Socket]] = {}
        self._pages: dict[str, set[asyncio.Queue[str | None]]] = {}

    # --- sockets ----------------------------------------------------------------------

    def attach(self, sock: Socket) -> None:
        self.sockets.add(sock)
        if sock.principal.kind is Kind.AGENT:
            self.agent_sockets[sock.principal.id] = sock

    def detach(self, sock: Socket) -> None:
        self.sockets.discard(sock)
        for topic in sock.topics:
            self._by_topic.get(topic, set()).discard(sock)
        sock.topics.clear()
        if self.agent_sockets.get(sock.principal.id) is sock:
            del self.agent_sockets[sock.principal.id]

    def supersede(self, agent_id: str) -> None:
        """A newer connection for this agent takes over: tell the old one, then close it."""
        old = self.agent_sockets.pop(agent_id, None)
        if old is None:
            return
        topic = f"agent_control:{agent_id}"
        if topic in old.topics:
            old.send(frame(old.topics[topic], None, topic, "supersede", wire.supersede()))
        old.close(1000, "superseded")
        log.info("agent %s: older connection superseded", agent_id)

    def close_agent(self, agent_id: str, code: int, reason: str) -> None:
        sock = self.agent_sockets.get(agent_id)
        if sock is not None:
            sock.close(code, reason)

    def close_all(self, code: int, reason: str) -> None:
        for sock in list(self.sockets):
            sock.close(code, reason)
        for queues in self._pages.values():
            for queue in queues:
                queue.put_nowait(None)

    def is_online(self, agent_id: str) -> bool:
        return agent_id in self.agent_sockets

    # --- frames -----------------------------------------------------------------------

    def handle(self, sock: Socket, raw: str, authorize: Authorizer) -> None:
        """Answer one client frame (heartbeat, join, leave, or anything else)."""
        try:
            parsed = json.loads(raw)
        except ValueError:
            log.warning("ignored a frame that is not JSON (%d bytes)", len(raw))
            return
        if not (isinstance(parsed, list) and len(parsed) == 5):
            log.warning("ignored a frame that is not a 5-element V2 array")
            return
        join_ref, ref, topic, event, _payload = parsed
        if not (isinstance(topic, str) and isinstance(event, str)):
            log.warning("ignored a frame without a string topic and event")
            return
        join_ref = None if join_ref is None else str(join_ref)
        ref = None if ref is None else str(ref)

        def reply(status: str, response: dict[str, Any]) -> None:
            payload = {"status": status, "response": response}
            sock.send(frame(join_ref, ref, topic, "phx_reply", payload))

        if topic == "phoenix":
            if event == "heartbeat":
                reply("ok", {})
            else:
                reply("error", {"reason": f"unsupported event {event!r}"})
        elif event == "phx_join":
            refusal = authorize(sock.principal, topic)
            if refusal is not None:
                self._leave(sock, topic)
                reply("error", {"reason": refusal})
                return
            sock.topics[topic] = join_ref
            self._by_topic.setdefault(topic, set()).add(sock)
            reply("ok", {})
        elif event == "phx_leave":
            self._leave(sock, topic)
            reply("ok", {})
        elif topic in sock.topics:
            reply("error", {"reason": f"unsupported event {event!r}"})
        else:
            reply("error", {"reason": "unmatched topic"})

    def _leave(self, sock: Socket, topic: str) -> None:
        sock.topics.pop(topic, None)
        self._by_topic.get(topic, set()).discard(sock)

    def revoke(self, agent_id: str, topic: str) -> None:
        """End `agent_id`'s subscription to `topic` (it lost its seat in the room): no
        later push on it reaches that agent, and a rejoin is refused (`authorize`).
        Silently, as the SDK expects: it leaves the room's channels itself on
        `room_removed`, and a server-side `phx_close` would make that leave fail (the
        client drops a closed topic); a `phx_leave` is answered ok either way."""
        for sock in list(self._by_topic.get(topic, ())):
            if sock.principal == Principal(Kind.AGENT, agent_id):
                self._leave(sock, topic)

    # --- pushes -----------------------------------------------------------------------

    def publish(self, pushes: list[Push]) -> None:
        for push in pushes:
            self._publish_one(push)

    def _publish_one(self, push: Push) -> None:
        body = json.dumps(push.payload, separators=(",", ":"))
        tail = f",null,{json.dumps(push.topic)},{json.dumps(push.event)},{body}]"
        for sock in self._by_topic.get(push.topic, ()):
            principal = sock.principal
            if principal.kind is Kind.USER and not push.users:
                continue
            if (
                principal.kind is Kind.AGENT
                and push.agents is not None
                and principal.id not in push.agents
            ):
                continue
            sock.send(f"[{json.dumps(sock.topics[push.topic])}{tail}")
        page_keys = []
        if push.page_room is not None:
            page_keys.append(push.page_room)
        if push.topic.startswith("user_rooms:"):
            page_keys.append(PAGE_ALL)
        if page_keys:
            line = json.dumps({"event": push.event, "payload": push.payload})
            for key in page_keys:
                for queue in self._pages.get(key, ()):
                    queue.put_nowait(line)

    # --- live pages -------------------------------------------------------------------

    def subscribe_page(self, key: str) -> asyncio.Queue[str | None]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._pages.setdefault(key, set()).add(queue)
        return queue

    def unsubscribe_page(self, key: str, queue: asyncio.Queue[str | None]) -> None:
        self._pages.get(key, set()).discard(queue)
