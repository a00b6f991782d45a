"""`Platform`: what every route and socket shares (state, broker, gate, saver, clock, auth,
page access).

Routes reach it as `request.app.state.platform`. It owns no server lifecycle; `Emulator`
in `server.py` builds it, starts and stops it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bandkit.emulator.access import PageAccess
from bandkit.emulator.channels import Broker, Kind, Principal
from bandkit.emulator.messages import MAX_DELIVERY_ATTEMPTS
from bandkit.emulator.ops import Outcome
from bandkit.emulator.persistence import Saver
from bandkit.emulator.state import EmulatorState, key_digest

log = logging.getLogger("bandkit.emulator")

AGENT_TOPICS = ("agent_control:", "agent_rooms:", "agent_contacts:")
USER_TOPICS = ("user_rooms:", "tasks:")
ROOM_TOPICS = ("chat_room:", "room_participants:")


def utc_now() -> str:
    """The clock seam: ISO-8601 UTC with microseconds and a `Z`."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Platform:
    def __init__(
        self,
        state: EmulatorState,
        user_key: str,
        saver: Saver | None,
        clock: Callable[[], str] = utc_now,
        pages: PageAccess | None = None,
    ) -> None:
        self.state = state
        self.saver = saver
        self.now = clock
        self._user_key_sha = key_digest(user_key)
        # Set while agents are served; cleared by `faults/pause` (see control.py).
        self.gate = asyncio.Event()
        self.gate.set()
        self._resume: asyncio.TimerHandle | None = None
        self.broker = Broker(self.gate)
        self.drop_sockets: Callable[[], int] = lambda: 0  # wired by the server
        self.unhandled = 0  # requests no route answered (each one is logged)
        self.max_attempts = MAX_DELIVERY_ATTEMPTS  # processing attempts per delivery
        # (agent id, room id) pairs halted by `agent.control stop` until `play`
        self.stopped: set[tuple[str, str]] = set()
        self.bulk_jobs: dict[str, dict[str, Any]] = {}  # bulk deletions, by job id
        self.pages = pages or PageAccess()  # login tokens, page sessions, feed limits

    def commit(self, outcome: Outcome | None = None) -> None:
        """After a mutation: deliver its pushes and schedule a save."""
        if outcome is not None:
            self.broker.publish(outcome.pushes)
            for agent_id, topic in outcome.revoked:
                self.broker.revoke(agent_id, topic)
        if self.saver is not None:
            self.saver.mark_dirty()

    def authenticate(self, api_key: str | None) -> Principal | None:
        """The principal of an API key; digests are compared in constant time."""
        if not api_key:
            return None
        digest = key_digest(api_key)
        if hmac.compare_digest(digest, self._user_key_sha):
            return Principal(Kind.USER, self.state.user.id)
        found = None
        for agent in self.state.agents.values():
            if hmac.compare_digest(agent.key_sha256, digest):
                found = agent.id
        return None if found is None else Principal(Kind.AGENT, found)

    def authorize(self, principal: Principal, topic: str) -> str | None:
        """None if `principal` may join `topic`, else the refusal reason for the reply."""
        prefix, _, rest = topic.partition(":")
        prefix += ":"
        if prefix in ROOM_TOPICS:
            room = self.state.rooms.get(rest)
            if room is None:
                return "unauthorized"
            if principal.kind is Kind.AGENT and principal.id not in room.participants:
                return "unauthorized"
            return None
        own = AGENT_TOPICS if principal.kind is Kind.AGENT else USER_TOPICS
        if prefix in own:
            return None if rest == principal.id else "unauthorized"
        if prefix in AGENT_TOPICS + USER_TOPICS:
            return "unauthorized"
        return "unmatched topic"

    def pause(self, seconds: float | None) -> None:
        """Hold agent traffic and all sockets for `seconds`, or until `resume` when None
        (a later pause replaces this one)."""
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        self.gate.clear()
        if seconds is None:
            log.warning("FAULT pause: agents and sockets held until resumed")
            return
        self._resume = asyncio.get_running_loop().call_later(seconds, self.resume)
        log.warning("FAULT pause: agents and sockets held for %.1f s", seconds)

    def resume(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if not self.gate.is_set():
            log.warning("FAULT pause over: delivering again")
        self.gate.set()
