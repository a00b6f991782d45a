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

The code: the vocabulary and ``BreakerConfig`` in ``breaker_types``, the state machine
(``CircuitBreaker``) in ``breaker_machine``; this module defines ``ObservedMessage`` and is
the public API: import everything from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from examples.docker_demo.breaker_machine import CircuitBreaker, Observation
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

__all__ = [
    "ARCHITECT_ABSENT",
    "CLOSING_PHASES",
    "COUNTED_SENDERS",
    "DECIDED_PHASES",
    "DESIGN_PAIR",
    "MAY_ADD",
    "MAY_NUDGE",
    "Action",
    "BreakerConfig",
    "CircuitBreaker",
    "Observation",
    "ObservedMessage",
    "Phase",
    "SenderClass",
    "StopCause",
]


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
