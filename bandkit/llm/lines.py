"""Which scripted line a request answers: a per-agent cursor over the room's messages.

A script with a `lines:` block (`peers: [names]`) numbers the messages its agent is asked
to answer, the way the demo's scripted brain does: each new message from a peer, and the
first one from anyone else (a human: the brief), takes the next line number (1, 2, ...);
a later message from a non-peer gets line 0 (`when: {line: 0}` answers a nudge or the
presenter). Band's adapters put the incoming message last in the prompt as
`[Sender Name]: text`, so the sender is the last `[...]: ` tag of the request's last user
message (`[System]: ...` updates come before it). A message seen before keeps its number:
every request of one turn (the tool calls, then the closing text) and a client's retry
answer the same line. The cursor spans all rooms of the agent (the demo has one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SENDER = re.compile(r"\[([^\]\n]+)\]: ")
LATER_HUMAN = 0


def sender_of(message: str | None) -> str | None:
    """The name in the last `[Name]: ` tag of `message`, or None."""
    if not message:
        return None
    found = SENDER.findall(message)
    return found[-1] if found else None


class LineCursor:
    """Numbers the distinct messages one agent answers (see the module docstring)."""

    def __init__(self, peers: Iterable[str]) -> None:
        self.peers = frozenset(peers)
        self._numbers: dict[str, int] = {}
        self._next = 1
        self._heard_other = False

    def line_of(self, message: str | None) -> int:
        """The line `message` answers: its number, 0 for a later non-peer message."""
        key = message or ""
        if key in self._numbers:
            return self._numbers[key]
        sender = sender_of(message)
        if sender in self.peers or not self._heard_other:
            self._heard_other = self._heard_other or sender not in self.peers
            number = self._next
            self._next += 1
        else:
            number = LATER_HUMAN
        self._numbers[key] = number
        return number
