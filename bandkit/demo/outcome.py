"""How a demo run ended, and its exit code: the one table, documented in the README.

| code | outcome |
|---|---|
| 0 | the architect's verdict was reached and the meeting closed cleanly |
| 1 | a failure: preflight, provisioning, an agent that never connected, teardown |
| 2 | the presenter ended the meeting before any verdict |
| 3 | hard kill: the undecided meeting reached the message cap |
| 4 | hard kill: the undecided meeting ran out of wall-clock time |
| 130 | interrupted (Ctrl-C or SIGTERM); everything was torn down |

A teardown that leaves something behind turns any outcome into 1 (run `demo.down`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from examples.docker_demo.breaker import StopCause


class Outcome(StrEnum):
    VERDICT = "verdict"
    FAILED = "failed"
    PRESENTER_ENDED = "presenter_ended"
    HARD_CAP = "hard_cap"
    WALL_CLOCK = "wall_clock"
    INTERRUPTED = "interrupted"


EXIT_CODES: Final[dict[Outcome, int]] = {
    Outcome.VERDICT: 0,
    Outcome.FAILED: 1,
    Outcome.PRESENTER_ENDED: 2,
    Outcome.HARD_CAP: 3,
    Outcome.WALL_CLOCK: 4,
    Outcome.INTERRUPTED: 130,
}


def from_meeting(cause: StopCause | None, *, verdict_reached: bool) -> Outcome:
    """The outcome of a meeting the breaker stopped (a decided meeting is a verdict)."""
    if verdict_reached:
        return Outcome.VERDICT
    match cause:
        case StopCause.HARD_CAP:
            return Outcome.HARD_CAP
        case StopCause.WALL_CLOCK:
            return Outcome.WALL_CLOCK
        case StopCause.PRESENTER_END:
            return Outcome.PRESENTER_ENDED
    return Outcome.FAILED
