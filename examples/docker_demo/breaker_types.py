"""The circuit breaker's vocabulary: senders, actions, stop causes, phases, and its config.

Pure data (no IO, no clock), shared by the state machine (``breaker_machine``) and
re-exported by ``breaker``, whose docstring states the rules. ``BreakerConfig`` is the single
source of the caps' defaults (``settings`` reads them field by field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class SenderClass(StrEnum):
    """Who wrote an observed message, as far as the conductor can tell."""

    PM = "pm"
    DEVELOPER = "developer"
    ARCHITECT = "architect"
    HUMAN = "human"
    UNKNOWN = "unknown"


class Action(StrEnum):
    """A step the conductor must take when ``poll`` returns it."""

    NUDGE_HANDOFF = "nudge_handoff"  # ask the PM to bring in the architect
    ADD_ARCHITECT = "add_architect"  # the handoff never landed: add the architect ourselves
    OPEN_FLOOR = "open_floor"  # interactive: the verdict is in, the presenter has the room
    HARD_KILL = "hard_kill"  # terminal: undecided meeting over its cap or wall clock
    TERMINATE_OK = "terminate_ok"  # terminal: a clean end


class StopCause(StrEnum):
    """Why the breaker stopped: the machine-readable twin of ``stop_reason``."""

    GRACE = "grace"  # decided, headless: closed after the grace period
    OPEN_FLOOR_IDLE = "open_floor_idle"  # decided, interactive: the presenter went quiet
    PRESENTER_END = "presenter_end"  # the presenter's end phrase, decided or not
    HARD_CAP = "hard_cap"  # undecided: too many counted messages
    WALL_CLOCK = "wall_clock"  # undecided: out of time
    LEFT_BLOCK = "left_block"  # the conductor left the guarded block (error, interrupt)


class Phase(StrEnum):
    """Where the meeting is. The only state besides the counters and one timer anchor."""

    DEBATING = "debating"  # PM and developer design; no handoff asked, no nudge yet
    HANDOFF_REQUESTED = "handoff_requested"  # the PM mentioned the architect: no nudge needed
    NUDGED = "nudged"  # the soft cap passed and the PM was nudged
    ARCHITECT_ADDED = "architect_added"  # the fallback add was issued; not confirmed yet
    ARCHITECT_PRESENT = "architect_present"  # the architect is in the room
    DECIDED = "decided"  # verdict in; headless grace tail (or the floor opens at next poll)
    OPEN_FLOOR = "open_floor"  # interactive: the presenter drives until the end or idle
    ENDING = "ending"  # the presenter ended the meeting; the next poll terminates
    STOPPED = "stopped"  # terminal: nothing more happens


# The design pair whose exchange the soft cap bounds, and every sender that counts.
DESIGN_PAIR = frozenset({SenderClass.PM, SenderClass.DEVELOPER})
COUNTED_SENDERS = DESIGN_PAIR | {SenderClass.ARCHITECT}
# Phases that may still nudge, that may still add, and where the architect is not known present.
MAY_NUDGE = frozenset({Phase.DEBATING})
MAY_ADD = frozenset({Phase.DEBATING, Phase.HANDOFF_REQUESTED, Phase.NUDGED})
ARCHITECT_ABSENT = MAY_ADD | {Phase.ARCHITECT_ADDED}
# Phases after the verdict (never hard-killed) and phases that ignore new messages.
DECIDED_PHASES = frozenset({Phase.DECIDED, Phase.OPEN_FLOOR})
CLOSING_PHASES = frozenset({Phase.ENDING, Phase.STOPPED})


def _require_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of messages, 1 or more, got {value!r}")


def _require_seconds(name: str, value: object, *, allow_zero: bool) -> None:
    rule = "0 or more" if allow_zero else "more than 0"
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        raise ValueError(f"{name} must be a finite number of seconds, {rule}, got {value!r}")


@dataclass(frozen=True)
class BreakerConfig:
    """The caps and timers: the single source of their defaults (seconds, message counts)."""

    soft_cap: int = 10
    handoff_deadline: int = 3
    hard_cap: int = 24
    wall_clock_s: float = 900.0
    grace_s: float = 20.0
    interactive: bool = False
    open_floor_idle_s: float = 420.0

    def __post_init__(self) -> None:
        for name in ("soft_cap", "handoff_deadline", "hard_cap"):
            _require_count(name, getattr(self, name))
        _require_seconds("wall_clock_s", self.wall_clock_s, allow_zero=False)
        _require_seconds("grace_s", self.grace_s, allow_zero=True)
        _require_seconds("open_floor_idle_s", self.open_floor_idle_s, allow_zero=False)
        if not isinstance(self.interactive, bool):
            raise ValueError(f"interactive must be True or False, got {self.interactive!r}")
        add_at = self.soft_cap + self.handoff_deadline
        if self.hard_cap <= add_at:
            raise ValueError(
                "hard_cap must be greater than soft_cap + handoff_deadline "
                f"({self.soft_cap} + {self.handoff_deadline} = {add_at}), got {self.hard_cap}; "
                "otherwise the fallback add can never fire"
            )
