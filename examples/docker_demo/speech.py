"""The conductor's own words, and how the transcript prints a line. Pure: no IO, no clock.

Each function returns the text of one conductor post; the caller decides the mentions
(the platform delivers a post only to the agents it mentions). ``transcript_line`` is the
one format of a live transcript line: elapsed seconds, speaker, recipients, text and the
breaker's state after the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.projection import END_PHRASE_HINT

SHOWN_CHARS: Final = 220  # a message longer than this is cut in the terminal (not on the page)
PM, DEV, ARCHITECT = (CAST[role].name for role in (Role.PM, Role.DEV, Role.ARCHITECT))


def room_title(topic: str, when: datetime) -> str:
    return f"Design Review — {topic} — {when:%Y-%m-%d %H:%M}"


def brief(topic: str) -> str:
    return (
        f"@{PM} Welcome to the design review: {topic}. {DEV} is here with you. Align on a "
        f"proposal, then bring in {ARCHITECT} for the final call: look him up with the peers "
        "tool, add him to the room and mention him. He rules with one line starting VERDICT:."
    )


def nudge(design_messages: int) -> str:
    return (
        f"@{PM} You and {DEV} have exchanged {design_messages} messages. Time for the final "
        f"call: look up {ARCHITECT} with the peers tool, add him and mention him."
    )


def add_note() -> str:
    return (
        f"@{ARCHITECT} The conductor added you: {PM} and {DEV} have not handed off. Read the "
        "discussion above and give the final call as one line starting VERDICT:."
    )


def open_floor(idle_s: float, *, typing_here: bool) -> str:
    where = "post in the room" + (" or type in the conductor's terminal" if typing_here else "")
    return (
        f"The verdict is in and the floor is open: {where} to ask the agents anything "
        f"(mention them with @Name), or say “{END_PHRASE_HINT}” to close. The meeting "
        f"closes after {idle_s:g} s without a word from the presenter"
        + ("." if typing_here else " (demo.up --headless closes right after the verdict).")
    )


def closer(reason: str, *, hard: bool) -> str:
    if hard:
        return f"Meeting stopped by the circuit breaker: {reason}. No decision was recorded."
    return f"Meeting closed: {reason}. Thank you, everyone."


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def transcript_line(
    elapsed_s: float,
    speaker: str,
    recipients: Sequence[str],
    text: str,
    state: str,
    *,
    full: bool = False,
) -> str:
    """One transcript line; ``full`` keeps the whole text (the verdict is never cut)."""
    to = f" → {', '.join(recipients)}" if recipients else ""
    shown = " ".join(text.split()) if full else shorten(text)
    return f"{elapsed_s:7.1f}s  {speaker}{to}: {shown}  [{state}]"
