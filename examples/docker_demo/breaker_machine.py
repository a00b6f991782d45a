"""The circuit breaker's state machine: ``record`` messages, ``poll(now)`` for due actions.

Pure (no IO, no clock); the rules are stated in ``breaker``'s docstring, which re-exports
``CircuitBreaker``. ``record`` reads a message through ``Observation``, the six fields of
``breaker.ObservedMessage`` (a protocol here, so this module needs nothing from ``breaker``).
"""

from __future__ import annotations

from types import TracebackType
from typing import Final, Protocol, Self

from examples.docker_demo.breaker_types import (
    ARCHITECT_ABSENT,
    CLOSING_PHASES,
    COUNTED_SENDERS,
    DECIDED_PHASES,
    DESIGN_PAIR,
    MAY_ADD,
    MAY_NUDGE,
    Action,
    BreakerConfig,
    Phase,
    SenderClass,
    StopCause,
)


class Observation(Protocol):
    """What ``record`` reads of a message (``breaker.ObservedMessage`` has exactly this)."""

    @property
    def sender_class(self) -> SenderClass: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def mentions_architect(self) -> bool: ...
    @property
    def is_final_decision(self) -> bool: ...
    @property
    def is_presenter(self) -> bool: ...
    @property
    def is_end_signal(self) -> bool: ...


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

    def record(self, msg: Observation) -> None:
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

    def _record_presenter(self, msg: Observation) -> None:
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
