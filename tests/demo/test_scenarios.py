"""Scenario files: every one loads, renders per role, and, played offline by a small model
of the platform's delivery rule (a message reaches only the agents it mentions), reaches
the stop its `expect` names under the default caps. The end-to-end tests check the same
on the real emulator; this one says in a second which scenario broke."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.docker_demo.brain import Cursor, Script
from examples.docker_demo.breaker import (
    Action,
    BreakerConfig,
    CircuitBreaker,
    ObservedMessage,
    SenderClass,
    StopCause,
)
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.projection import DECISION_MARKER, is_end_phrase
from examples.docker_demo.scenario import (
    Expect,
    ScenarioError,
    agent_script,
    available,
    load,
    presenter_lines,
)
from examples.docker_demo.settings import breaker_config_from_env

SIX = ["happy", "no-handoff", "presenter-end", "runaway", "silent-architect", "slow"]
SENDER = {Role.PM: SenderClass.PM, Role.DEV: SenderClass.DEVELOPER}
BY_NAME = {member.name: role for role, member in CAST.items()}
EXPECTED = {
    StopCause.HARD_CAP: Expect.HARD_CAP,
    StopCause.WALL_CLOCK: Expect.WALL_CLOCK,
    StopCause.PRESENTER_END: Expect.PRESENTER_END,
}
STEP_S = 0.1  # model time per delivered message, besides a line's own delay


@dataclasses.dataclass
class Played:
    cause: StopCause | None
    verdict: bool
    actions: list[Action]
    speakers: list[str]


def play(name: str, config: BreakerConfig | None = None) -> Played:
    scenario = load(name)
    config = config or breaker_config_from_env(scenario.breaker_env())
    cursors = {role: Cursor(Script.parse(agent_script(scenario, role, topic="T"))) for role in Role}
    cues = presenter_lines(scenario, topic="T")
    breaker = CircuitBreaker(config, start_time=0.0)
    room = {Role.PM, Role.DEV}
    inbox: deque[tuple[Role, bool]] = deque([(Role.PM, True)])  # the brief
    now, seen, played = 0.0, 0, Played(None, False, [], [])
    while not breaker.stopped:
        if not inbox:  # nothing in flight: the next thing that can happen is the wall clock
            now = max(now, config.wall_clock_s)
        else:
            role, from_human = inbox.popleft()
            line = cursors[role].next_line(from_human=from_human)
            if line is not None:
                now += line.delay_s + STEP_S
                room |= {BY_NAME[n] for n in line.add}
                mentioned = {BY_NAME[n] for n in line.mention}
                assert mentioned <= room, f"{name}: {role} mentions someone not in the room"
                if Role.ARCHITECT in room:
                    breaker.note_architect_present()
                architect = role is Role.ARCHITECT
                breaker.record(
                    ObservedMessage(
                        SENDER.get(role, SenderClass.ARCHITECT),
                        now,
                        mentions_architect=Role.ARCHITECT in mentioned,
                        is_final_decision=architect and bool(DECISION_MARKER.search(line.say)),
                    )
                )
                played.speakers.append(role.value)
                inbox.extend((r, False) for r in sorted(mentioned - {role}))
                seen += 1
                while cues and seen >= cues[0].after_messages:
                    end = is_end_phrase(cues.pop(0).say)
                    breaker.record(
                        ObservedMessage(
                            SenderClass.HUMAN, now, is_presenter=True, is_end_signal=end
                        )
                    )
        for action in breaker.poll(now):
            played.actions.append(action)
            if action is Action.NUDGE_HANDOFF:
                inbox.append((Role.PM, True))
            elif action is Action.ADD_ARCHITECT:
                room.add(Role.ARCHITECT)
                breaker.note_architect_present()
                inbox.append((Role.ARCHITECT, True))
    played.cause, played.verdict = breaker.stop_cause, breaker.verdict_reached
    return played


def test_the_six_scenarios_are_there() -> None:
    assert available() == SIX


@pytest.mark.parametrize("name", SIX)
def test_each_scenario_reaches_what_it_expects(name: str) -> None:
    played = play(name)
    reached = Expect.VERDICT if played.verdict else EXPECTED.get(played.cause)  # type: ignore[arg-type]
    assert reached is load(name).expect, played


def test_happy_hands_off_without_any_breaker_action() -> None:
    played = play("happy")
    assert played.actions == [Action.TERMINATE_OK]
    assert played.speakers[:6] == ["pm", "dev", "pm", "dev", "pm", "architect"]


def test_no_handoff_is_nudged_then_the_architect_is_added() -> None:
    played = play("no-handoff")
    assert played.actions == [Action.NUDGE_HANDOFF, Action.ADD_ARCHITECT, Action.TERMINATE_OK]
    assert "architect" in played.speakers


def test_runaway_is_never_nudged_and_dies_on_the_cap() -> None:
    played = play("runaway")
    assert played.actions == [Action.HARD_KILL]
    assert played.cause is StopCause.HARD_CAP


def test_a_shorter_wall_clock_from_the_environment_wins() -> None:
    scenario = load("slow")
    env = {**scenario.breaker_env(), "DEMO_WALL_CLOCK_S": "3"}
    assert breaker_config_from_env(env).wall_clock_s == 3
    assert play("slow", breaker_config_from_env(env)).cause is StopCause.WALL_CLOCK


def test_the_topic_is_filled_in_and_mentions_are_names() -> None:
    staged = agent_script(load("happy"), Role.PM, topic="the topic")
    assert "the topic" in staged["turns"][0]["say"]
    assert staged["turns"][0]["mention"] == [CAST[Role.DEV].name]
    assert staged["name"] == CAST[Role.PM].name


HAPPY = Path(__file__).parents[2] / "examples" / "docker_demo" / "scenarios" / "happy.yaml"


def _drop_architect(data: dict[str, Any]) -> None:
    del data["roles"]["architect"]


def _unknown_breaker_field(data: dict[str, Any]) -> None:
    data["breaker"] = {"wall_clocks": 12}


def _caps_that_do_not_fit(data: dict[str, Any]) -> None:
    data["breaker"] = {"hard_cap": 2}


def _repeat_past_the_end(data: dict[str, Any]) -> None:
    data["roles"]["pm"]["repeat_from"] = 9


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda d: d.update(name="other"), "calls itself"),
        (lambda d: d.update(expect="maybe"), "expect"),
        (lambda d: d.update(schema_version="2"), "schema_version"),
        (lambda d: d.update(extra=1), "extra"),
        (_drop_architect, "every role needs a script"),
        (_unknown_breaker_field, "unknown breaker field"),
        (_caps_that_do_not_fit, "hard_cap must be greater"),
        (_repeat_past_the_end, "must point at one of the 4 turns"),
    ],
)
def test_a_broken_scenario_names_the_problem(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], fragment: str
) -> None:
    data = yaml.safe_load(HAPPY.read_text())
    edit(data)
    (tmp_path / "happy.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=fragment):
        load("happy", directory=tmp_path)


def test_an_unknown_scenario_lists_the_choices() -> None:
    with pytest.raises(ScenarioError, match="choose one of happy"):
        load("nope")
    with pytest.raises(ScenarioError):
        load("../happy")
