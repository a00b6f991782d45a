"""The circuit breaker that bounds the three-agent design meeting.

Pure: no IO, no network, no clock. The conductor feeds every room message to ``record``, asks
``poll(now)`` for the actions due (``now`` is its own monotonic clock) and carries out the
returned ``Action`` values in order.

Facts, each established on its own:

* handoff requested: a PM message mentions the architect. It suppresses the nudge only: a
  mention does not prove the architect arrived;
* architect present: the architect spoke, or the conductor called ``note_architect_present``.
  It suppresses the nudge and the fallback add;
* decision: an architect message with ``is_final_decision``. A decided meeting is never
  hard-killed.

Counting. Only PM, DEVELOPER and ARCHITECT messages count; HUMAN and UNKNOWN messages, and any
presenter message, are recorded but never counted. The hard cap counts every counted message;
the soft count is PM and DEVELOPER messages only, and only while the architect is absent.

Tiers, evaluated by ``poll(now)`` in this order:

1. presenter end: a presenter message with ``is_end_signal`` ends the meeting at any time,
   before or after a decision: TERMINATE_OK, "presenter ended the meeting";
2. decided: the first poll after the decision stamps it on the conductor clock. Headless
   (``interactive=False``): TERMINATE_OK once ``grace_s`` has passed since that stamp.
   Interactive: OPEN_FLOOR once, then TERMINATE_OK after ``open_floor_idle_s`` without
   presenter activity. The idle timer starts when the floor opens and restarts at the first
   poll after each presenter message; agent chatter does not hold the floor;
3. hard kill, undecided meetings only: HARD_KILL once the counted messages reach ``hard_cap``
   or ``now - start_time >= wall_clock_s``;
4. nudge: NUDGE_HANDOFF, at most once, when the soft count reaches ``soft_cap`` with no
   handoff requested and the architect absent;
5. add: ADD_ARCHITECT, at most once, when the soft count reaches
   ``soft_cap + handoff_deadline`` with the architect still absent (a mention alone does not
   prevent it). When 4 and 5 fall due at one poll, both are returned, nudge first.

Timers run only on the ``now`` given to ``poll``, never on message timestamps, so platform
clock skew cannot move them; a decided meeting lasts at most ``wall_clock_s`` plus its tail
(grace or open floor). After a terminal action, or once a ``with breaker:`` block is left,
``poll`` returns ``[]`` and ``record`` does nothing. Every terminal transition records
``stop_reason``, a sentence naming the cause, and ``stop_cause``, the same as a
``StopCause`` value; ``verdict_reached`` says whether a decision was ever recorded (a
presenter may end a decided meeting).

``BreakerConfig`` is the single source of the caps' defaults (``settings`` reads them field
by field). The module needs nothing but the standard library, so it loads by path as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Final, Self


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


@dataclass(frozen=True)
class ObservedMessage:
    """One room message as the breaker sees it.

    ``timestamp`` is the platform's epoch seconds: context for ordering only, never read by a
    timer. ``is_presenter`` marks the human running the demo (not the conductor's own posts),
    and ``is_end_signal`` counts only together with it.
    """

    sender_class: SenderClass
    timestamp: float
    mentions_architect: bool = False
    is_final_decision: bool = False
    is_presenter: bool = False
    is_end_signal: bool = False


class CircuitBreaker:
    """The meeting's state machine: ``record`` messages, ``poll(now)`` for due actions."""

    def __init__(self, config: BreakerConfig | None = None, *, start_time: float) -> None:
        self.config: Final[BreakerConfig] = BreakerConfig() if config is None else config
        self._start = start_time
        self._phase = Phase.DEBATING
        self._recorded = 0  # every message seen before the end
        self._counted = 0  # PM, developer and architect messages: the hard cap
        self._design = 0  # PM and developer messages while the architect is absent: soft cap
        # Conductor-clock anchor of the current phase's timer (grace start in DECIDED, last
        # presenter activity in OPEN_FLOOR). None means "stamp it at the next poll".
        self._since: float | None = None
        self._stop_reason: str | None = None
        self._stop_cause: StopCause | None = None
        self._verdict = False  # a decision was recorded at some point

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def recorded_messages(self) -> int:
        """Messages recorded, counted or not."""
        return self._recorded

    @property
    def counted_messages(self) -> int:
        """Messages that move the hard cap (PM, developer, architect)."""
        return self._counted

    @property
    def design_messages(self) -> int:
        """PM and developer messages while the architect was absent (the soft cap's count)."""
        return self._design

    @property
    def stopped(self) -> bool:
        """True once a terminal action was returned or the guarded block was left."""
        return self._phase is Phase.STOPPED

    @property
    def stop_reason(self) -> str | None:
        """Why the meeting stopped, as a sentence; None while it runs."""
        return self._stop_reason

    @property
    def stop_cause(self) -> StopCause | None:
        """Why the meeting stopped, as a ``StopCause``; None while it runs."""
        return self._stop_cause

    @property
    def verdict_reached(self) -> bool:
        """True once an architect decision was recorded (it stays True after the stop)."""
        return self._verdict

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Leaving the block stops the breaker for good; an exception propagates."""
        if self._phase is not Phase.STOPPED:
            cause = "" if exc_type is None else f" on {exc_type.__name__}"
            self._stop(None, f"conductor left the guarded block{cause}", StopCause.LEFT_BLOCK)

    def note_architect_present(self) -> None:
        """The conductor confirmed the architect is a participant: no nudge or add is needed."""
        if self._phase in ARCHITECT_ABSENT:
            self._phase = Phase.ARCHITECT_PRESENT

    def record(self, msg: ObservedMessage) -> None:
        """Take one message into account: the counters and the three facts."""
        if self._phase in CLOSING_PHASES:
            return
        self._recorded += 1
        if msg.is_presenter:
            self._record_presenter(msg)
            return
        if msg.sender_class not in COUNTED_SENDERS:
            return  # human or unknown: recorded, never counted
        self._counted += 1
        if msg.sender_class in DESIGN_PAIR and self._phase in ARCHITECT_ABSENT:
            self._design += 1
        if msg.sender_class is SenderClass.PM and msg.mentions_architect:
            if self._phase is Phase.DEBATING:
                self._phase = Phase.HANDOFF_REQUESTED
        elif msg.sender_class is SenderClass.ARCHITECT:
            if msg.is_final_decision and self._phase not in DECIDED_PHASES:
                self._phase, self._since, self._verdict = Phase.DECIDED, None, True
            elif self._phase in ARCHITECT_ABSENT:
                self._phase = Phase.ARCHITECT_PRESENT

    def _record_presenter(self, msg: ObservedMessage) -> None:
        if msg.is_end_signal:
            self._phase = Phase.ENDING
        elif self._phase is Phase.OPEN_FLOOR:
            self._since = None  # activity: restart the idle timer at the next poll

    def poll(self, now: float) -> list[Action]:
        """The actions due at ``now`` (the conductor's monotonic clock), in execution order."""
        match self._phase:
            case Phase.STOPPED:
                return []
            case Phase.ENDING:
                return self._stop(
                    Action.TERMINATE_OK, "presenter ended the meeting", StopCause.PRESENTER_END
                )
            case Phase.DECIDED:
                return self._poll_decided(now)
            case Phase.OPEN_FLOOR:
                return self._poll_open_floor(now)
        return self._poll_undecided(now)

    def _poll_decided(self, now: float) -> list[Action]:
        cfg = self.config
        if self._since is None:
            self._since = now
            if cfg.interactive:
                self._phase = Phase.OPEN_FLOOR
                return [Action.OPEN_FLOOR]
        if now - self._since >= cfg.grace_s:
            reason = f"decided (architect verdict), closed after {cfg.grace_s:g} s grace"
            return self._stop(Action.TERMINATE_OK, reason, StopCause.GRACE)
        return []

    def _poll_open_floor(self, now: float) -> list[Action]:
        if self._since is None:
            self._since = now
        idle = self.config.open_floor_idle_s
        if now - self._since >= idle:
            reason = f"open floor idle for {idle:g} s"
            return self._stop(Action.TERMINATE_OK, reason, StopCause.OPEN_FLOOR_IDLE)
        return []

    def _poll_undecided(self, now: float) -> list[Action]:
        cfg = self.config
        if self._counted >= cfg.hard_cap:
            reason = f"hard cap of {cfg.hard_cap} messages reached"
            return self._stop(Action.HARD_KILL, reason, StopCause.HARD_CAP)
        if now - self._start >= cfg.wall_clock_s:
            reason = f"wall clock of {cfg.wall_clock_s:g} s reached"
            return self._stop(Action.HARD_KILL, reason, StopCause.WALL_CLOCK)
        actions: list[Action] = []
        if self._phase in MAY_NUDGE and self._design >= cfg.soft_cap:
            self._phase = Phase.NUDGED
            actions.append(Action.NUDGE_HANDOFF)
        if self._phase in MAY_ADD and self._design >= cfg.soft_cap + cfg.handoff_deadline:
            self._phase = Phase.ARCHITECT_ADDED
            actions.append(Action.ADD_ARCHITECT)
        return actions

    def _stop(self, action: Action | None, reason: str, cause: StopCause) -> list[Action]:
        """The one terminal transition: record why, stop, and return the terminal action."""
        self._phase, self._since = Phase.STOPPED, None
        self._stop_reason, self._stop_cause = reason, cause
        return [] if action is None else [action]
