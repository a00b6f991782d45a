"""Who is in the meeting: the three roles, their display names, sandboxes and descriptions.

One table (``CAST``), read by the staging, provisioning, conductor and agent scripts alike.
Every description carries ``MARKER`` so a sweep of stale demo agents touches nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

MARKER: Final = "[band-demo]"
SANDBOX_PREFIX: Final = "band-demo-"
DEFAULT_TOPIC: Final = "how to run untrusted AI agents in isolated sandboxes"
# What an agent's main.py logs once it is connected (each main.py spells it; a test pins it).
READY_LINE: Final = "demo agent ready"


class Role(StrEnum):
    """A seat at the table; the value names the agent's workspace directory."""

    PM = "pm"
    DEV = "dev"
    ARCHITECT = "architect"


@dataclass(frozen=True)
class Member:
    role: Role
    name: str  # the agent's display name on the platform
    title: str  # the job, as the other two address it
    pitch: str  # what this member brings (the first part of the description)

    @property
    def sandbox(self) -> str:
        return SANDBOX_PREFIX + self.role.value

    @property
    def description(self) -> str:
        """The platform description: the pitch and the sweep marker (10-500 characters)."""
        return f"{self.pitch} {MARKER}"


CAST: Final[dict[Role, Member]] = {
    Role.PM: Member(
        Role.PM,
        "Maya (PM)",
        "product manager",
        "Maya, the product manager of the design review: owns the outcome and the handoff.",
    ),
    Role.DEV: Member(
        Role.DEV,
        "Sam (Dev)",
        "developer",
        "Sam, the developer of the design review: owns the implementation plan.",
    ),
    Role.ARCHITECT: Member(
        Role.ARCHITECT,
        "Jordan (Architect)",
        "architect",
        "Jordan, the architect of the design review: gives the final VERDICT.",
    ),
}
DEMO_NAMES: Final = frozenset(member.name for member in CAST.values())
DEMO_SANDBOXES: Final = frozenset(member.sandbox for member in CAST.values())


def member(role: Role | str) -> Member:
    """The member in ``role`` (a ``Role`` or its value); an unknown role raises ValueError."""
    try:
        return CAST[Role(role)]
    except ValueError:
        choices = ", ".join(r.value for r in Role)
        raise ValueError(f"unknown role {role!r}; choose one of {choices}") from None


def is_demo_agent(name: str, description: str | None) -> bool:
    """True for an agent a demo run registered: one of our names and the marker."""
    return name in DEMO_NAMES and MARKER in (description or "")
