"""The circuit breaker against its module docstring.

Each scenario is a timeline script, one token per step:

* ``pm@4`` / ``dev@`` / ``arch@`` / ``human@`` / ``unknown@`` / ``presenter@``: a message
  with that platform stamp is recorded; ``+mention``, ``+verdict`` and ``+end`` set its flags;
* ``?30`` polls at conductor time 30 and asserts that nothing is due; ``?30=nudge,add``
  asserts exactly those actions, in that order (``nudge add open kill done``);
* ``present``: the conductor confirms the architect is a participant;
* ``!grace``: the expected stop reason (a key of ``REASONS``); without one the breaker must
  still be running at the end.

Every poll asserts the exact actions, so an unexpected action fails the scenario.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import math
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from examples.docker_demo import breaker as breaker_module
from examples.docker_demo.breaker import (
    Action,
    BreakerConfig,
    CircuitBreaker,
    ObservedMessage,
    Phase,
    SenderClass,
    StopCause,
)

SENDERS = {
    "pm": SenderClass.PM,
    "dev": SenderClass.DEVELOPER,
    "arch": SenderClass.ARCHITECT,
    "human": SenderClass.HUMAN,
    "unknown": SenderClass.UNKNOWN,
    "presenter": SenderClass.HUMAN,  # with is_presenter set
}
FLAGS = {"mention": "mentions_architect", "verdict": "is_final_decision", "end": "is_end_signal"}
ACTIONS = {
    "nudge": Action.NUDGE_HANDOFF,
    "add": Action.ADD_ARCHITECT,
    "open": Action.OPEN_FLOOR,
    "kill": Action.HARD_KILL,
    "done": Action.TERMINATE_OK,
}
# Small caps so each scenario's intent shows in its message count; LIVE is interactive.
SMALL = BreakerConfig(
    soft_cap=4, handoff_deadline=2, hard_cap=8, wall_clock_s=100.0, open_floor_idle_s=30.0
)
LIVE = dataclasses.replace(SMALL, interactive=True)
REASONS = {
    "hard": "hard cap of 8 messages reached",
    "wall": "wall clock of 100 s reached",
    "grace": "decided (architect verdict), closed after 20 s grace",
    "grace0": "decided (architect verdict), closed after 0 s grace",
    "idle": "open floor idle for 30 s",
    "ended": "presenter ended the meeting",
}
CAUSES = {
    "hard": StopCause.HARD_CAP,
    "wall": StopCause.WALL_CLOCK,
    "grace": StopCause.GRACE,
    "grace0": StopCause.GRACE,
    "idle": StopCause.OPEN_FLOOR_IDLE,
    "ended": StopCause.PRESENTER_END,
}
VERDICT_LIVE = "arch@10+verdict ?10=open"  # interactive: the floor opens at t=10


def message(token: str) -> ObservedMessage:
    head, *flags = token.split("+")
    who, _, stamp = head.partition("@")
    return ObservedMessage(
        SENDERS[who],
        float(stamp),
        is_presenter=who == "presenter",
        **{FLAGS[flag]: True for flag in flags},
    )


def play(cb: CircuitBreaker, script: str) -> None:
    for token in script.split():
        if token == "present":
            cb.note_architect_present()
        elif token.startswith("?"):
            now, _, due = token[1:].partition("=")
            expect = [ACTIONS[name] for name in due.split(",") if name]
            assert cb.poll(float(now)) == expect, f"{token} in {script!r}"
        elif not token.startswith("!"):  # "!reason" is the expected stop reason
            cb.record(message(token))


def turns(n: int, start: int = 1, due: Mapping[int, str] | None = None) -> str:
    """``n`` alternating PM/developer messages, each polled on arrival (conductor time = its
    stamp); ``due`` maps a message's 1-based number in this run to the actions due then."""
    steps = []
    for i, t in enumerate(range(start, start + n)):
        after = (due or {}).get(i + 1)
        steps.append(f"{'dev' if i % 2 else 'pm'}@{t} ?{t}" + (f"={after}" if after else ""))
    return " ".join(steps)


def batch(n: int, start: int = 1) -> str:
    """``n`` alternating PM/developer messages delivered together, without a poll."""
    return " ".join(f"{'dev' if i % 2 else 'pm'}@{start + i}" for i in range(n))


NUDGE_ADD = {4: "nudge", 6: "add"}
HEADLESS = {
    # counting
    "quiet meeting emits nothing": turns(2),
    "human and unknown senders never count": " ".join(f"human@{t}" for t in range(20))
    + f" unknown@21 ?21 {turns(4, 30, {4: 'nudge'})}",
    "presenter interjections never count": "pm@1 presenter@1 presenter@1 ?1 dev@2 presenter@2 ?2 "
    "pm@3 presenter@3 ?3 dev@4 presenter@4 ?4=nudge "
    + " ".join(f"presenter@{t}" for t in range(10, 22))
    + " ?30",
    "soft count stops once the architect speaks; the hard count goes on": f"{turns(3)} arch@4 ?4 "
    f"{turns(4, 5, {4: 'kill'})} !hard",
    # nudge and fallback add
    "soft cap nudges once": turns(5, due={4: "nudge"}),
    "handoff deadline adds after the nudge": turns(7, due=NUDGE_ADD),
    "batched messages: nudge then add in one poll": f"{batch(6)} ?6=nudge,add",
    "pm mention suppresses the nudge; a mention without an add still adds": f"{turns(3)} "
    f"pm@4+mention ?4 {turns(2, 5, {2: 'add'})}",
    "developer or presenter mention is not a handoff": f"presenter@0+mention {turns(3)} "
    "dev@4+mention ?4=nudge",
    "architect already present: no nudge, no add": f"present {turns(7)}",
    "architect present is still hard-capped": f"present {turns(8, due={8: 'kill'})} !hard",
    "architect speaking stops the fallback add": f"{turns(4, due={4: 'nudge'})} arch@5 ?5 "
    f"{turns(2, 6)}",
    # decision
    "non-verdict architect message does not end": "pm@1+mention arch@2 ?50",
    "verdict closes after grace": "arch@2+verdict ?10 ?29 ?30=done !grace",
    "second verdict keeps the grace": "arch@2+verdict ?10 arch@15+verdict ?15 ?30=done !grace",
    "future platform stamp does not move the grace": "arch@9999+verdict ?100 ?119 ?120=done !grace",
    "past platform stamp does not move the grace": "arch@-5000+verdict ?50 ?69 ?70=done !grace",
    "platform stamps do not move the wall clock": "pm@1e9 dev@-1e9 ?99 ?100=kill !wall",
    "decision at message hard_cap-1 beats the cap": f"{turns(6, due=NUDGE_ADD)} arch@7+verdict "
    f"?7 {turns(5, 8)} ?26 ?27=done !grace",
    "decided meeting outlives the wall clock": f"{turns(7, due=NUDGE_ADD)} arch@8+verdict ?105 "
    "?124 ?125=done !grace",
    "decision in the same batch as the cap": f"{batch(8)} arch@9+verdict ?9 ?29=done !grace",
    # hard kill and terminal
    "hard cap kills a runaway": f"{turns(8, due={**NUDGE_ADD, 8: 'kill'})} !hard",
    "wall clock kills a slow meeting": "pm@1 ?99.9 ?100=kill !wall",
    "nothing after a hard kill": "pm@1 ?100=kill dev@101 arch@102+verdict presenter@103+end "
    "present ?104 ?500 !wall",
    "nothing after a clean end": f"arch@2+verdict ?10 ?30=done {turns(8, 31)} !grace",
    # the presenter
    "presenter ends before any verdict (headless)": "pm@1 dev@2 presenter@3+end ?3=done !ended",
    "presenter ends during the grace tail": "arch@2+verdict ?10 presenter@12+end ?12=done !ended",
    "presenter end beats the hard cap in one batch": f"{batch(8)} presenter@9+end ?9=done !ended",
    "end signal from anyone but the presenter is ignored": "human@1+end pm@2+end ?5",
    "a verdict after the end signal does not reopen": "presenter@3+end arch@4+verdict ?5=done "
    "!ended",
}
INTERACTIVE = {
    "verdict opens the floor once": f"{VERDICT_LIVE} ?11 ?12",
    "presenter end phrase closes the floor": f"{VERDICT_LIVE} presenter@15+end ?15=done !ended",
    "open floor closes when the presenter is idle": f"{VERDICT_LIVE} ?39 ?40=done !idle",
    "presenter activity restarts the idle timer at the next poll": f"{VERDICT_LIVE} "
    "presenter@35 ?35 ?60 ?64.9 ?65=done !idle",
    "presenter stamp does not move the idle timer": f"{VERDICT_LIVE} presenter@-1e6 ?35 ?64 "
    "?65=done !idle",
    "agent chatter does not hold the floor": f"{VERDICT_LIVE} pm@12 ?12 dev@15 ?15 arch@20 ?20 "
    "pm@39 ?39 ?40=done !idle",
    "presenter talk before the verdict does not extend the floor": f"presenter@5 ?5 {VERDICT_LIVE}"
    " ?39 ?40=done !idle",
    "presenter ends before any verdict (interactive)": "pm@1 dev@2 presenter@3+end ?3=done !ended",
}
SCENARIOS = [
    *(pytest.param(SMALL, script, id=name) for name, script in HEADLESS.items()),
    *(
        pytest.param(LIVE, script, id=f"interactive: {name}")
        for name, script in INTERACTIVE.items()
    ),
    pytest.param(
        dataclasses.replace(SMALL, grace_s=0), "arch@2+verdict ?10=done !grace0", id="zero grace"
    ),
]


@pytest.mark.parametrize(("config", "script"), SCENARIOS)
def test_scenario(config: BreakerConfig, script: str) -> None:
    cb = CircuitBreaker(config, start_time=0.0)
    play(cb, script)
    keys = [token[1:] for token in script.split() if token.startswith("!")]
    assert cb.stop_reason == (REASONS[keys[0]] if keys else None)
    assert cb.stop_cause is (CAUSES[keys[0]] if keys else None)
    assert cb.stopped is bool(keys)
    verdicts = [token for token in script.split() if "+verdict" in token]
    if keys and keys[0] in ("grace", "grace0", "idle"):
        assert cb.verdict_reached
    if not verdicts:
        assert not cb.verdict_reached


def test_recorded_but_not_counted() -> None:
    cb = CircuitBreaker(SMALL, start_time=0.0)
    play(cb, "human@1 unknown@2 presenter@3 pm@4")
    assert (cb.recorded_messages, cb.counted_messages) == (4, 1)


def test_phases_follow_the_meeting() -> None:
    cb = CircuitBreaker(SMALL, start_time=0.0)
    seen = [cb.phase]
    for step in f"{batch(4)} ?4=nudge {batch(2, 5)} ?6=add present arch@7+verdict ?7".split():
        play(cb, step)
        if seen[-1] is not cb.phase:
            seen.append(cb.phase)
    assert " ".join(seen) == "debating nudged architect_added architect_present decided"
    play(cb, "?27=done")
    assert cb.phase is Phase.STOPPED


def test_guarded_block_stops_the_breaker() -> None:
    cb = CircuitBreaker(SMALL, start_time=0.0)
    with cb as guard:
        assert guard is cb
        assert cb.stop_reason is None
    assert cb.stopped
    assert cb.stop_reason == "conductor left the guarded block"
    assert cb.stop_cause is StopCause.LEFT_BLOCK
    cb.record(ObservedMessage(SenderClass.ARCHITECT, 1, is_final_decision=True))
    assert cb.poll(1000) == []


def test_guarded_block_never_suppresses_an_exception() -> None:
    cb = CircuitBreaker(SMALL, start_time=0.0)
    with pytest.raises(RuntimeError, match="boom"), cb:
        raise RuntimeError("boom")
    assert cb.stopped
    assert cb.stop_reason == "conductor left the guarded block on RuntimeError"
    assert cb.poll(1000) == []


def test_guarded_block_keeps_an_earlier_reason() -> None:
    with CircuitBreaker(SMALL, start_time=0.0) as cb:
        assert cb.poll(100) == [Action.HARD_KILL]
    assert cb.stop_reason == REASONS["wall"]


def test_defaults_are_the_documented_caps() -> None:
    assert dataclasses.astuple(BreakerConfig()) == (10, 3, 24, 900.0, 20.0, False, 420.0)
    assert CircuitBreaker(start_time=0.0).config == BreakerConfig()


def test_wire_values_keep_their_spelling() -> None:
    assert " ".join(SenderClass) == "pm developer architect human unknown"
    assert " ".join(Action) == "nudge_handoff add_architect open_floor hard_kill terminate_ok"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("soft_cap", 0),
        ("soft_cap", -1),
        ("soft_cap", True),
        ("handoff_deadline", 0),
        ("hard_cap", 1.5),
        ("hard_cap", 6),  # == soft_cap + handoff_deadline: the add could never fire
        ("wall_clock_s", 0),
        ("wall_clock_s", math.inf),
        ("wall_clock_s", "900"),
        ("grace_s", -1),
        ("grace_s", math.nan),
        ("open_floor_idle_s", 0.0),
        ("interactive", 1),
    ],
)
def test_config_rejects_bad_values(field: str, value: Any) -> None:  # deliberately ill-typed
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        dataclasses.replace(SMALL, **{field: value})


def test_config_accepts_the_edges() -> None:
    edge = dataclasses.replace(SMALL, hard_cap=7, grace_s=0, wall_clock_s=1)
    assert (edge.hard_cap, edge.grace_s, edge.wall_clock_s) == (7, 0, 1)


def test_breaker_module_is_pure() -> None:
    tree = ast.parse(inspect.getsource(breaker_module))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert "dataclasses" in imported  # the walk sees the imports
    assert not imported & {"asyncio", "os", "time", "socket", "datetime", "subprocess", "random"}
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not called & {"open", "print", "input", "exec", "eval", "__import__"}


def test_breaker_loads_by_path_alone() -> None:
    """Users load the breaker by its path: it needs only the standard library."""
    spec = importlib.util.spec_from_file_location("breaker_by_path", breaker_module.__file__)
    assert spec is not None
    assert spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded  # dataclasses resolve the module's annotations here
    try:
        spec.loader.exec_module(loaded)
    finally:
        del sys.modules[spec.name]
    assert dataclasses.asdict(loaded.BreakerConfig()) == dataclasses.asdict(BreakerConfig())


def test_docstring_names_every_action_and_reason() -> None:
    doc = breaker_module.__doc__ or ""
    for action in Action:
        assert action.name in doc, action
    assert REASONS["ended"] in doc
