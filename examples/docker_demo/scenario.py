"""Scenario files: what each scripted agent says, in order, and what the run should show.

A scenario is ``scenarios/<name>.yaml`` (schema version "1", unknown keys refused):

* ``expect``: the stop the scenario is built to reach (``verdict``, ``hard_cap``,
  ``wall_clock``, ``presenter_end``); the tests hold every scenario to it;
* ``breaker``: optional ``BreakerConfig`` overrides (e.g. a short wall clock for
  ``slow``). Precedence, written once: ``BreakerConfig()`` defaults, then these, then
  the ``DEMO_*`` environment (see ``settings``);
* ``roles.<pm|dev|architect>``: ordered ``turns``. A turn is consumed by each message the
  agent receives from a peer, and by the first message it receives from a human (the
  brief, or the conductor's note when it adds the architect). Later human messages (a
  nudge, the presenter), and a human's once the turns ran out (the presenter on the open
  floor), get ``on_human`` instead, or no reply. When the turns run out:
  ``after: silent`` answers nothing, ``after: repeat`` starts again at ``repeat_from``;
* a turn: ``say`` (``{topic}``, ``{pm}``, ``{dev}``, ``{architect}`` are filled in),
  ``mention`` (roles; the message goes to them; none: to the presenter, which wakes no
  agent), ``look_up`` (find these peers with the peers tool first), ``add`` (then add
  them to the room), ``delay_s`` (thinking time);
* ``presenter``: scripted presenter lines, each posted once ``after_messages`` agent
  messages were seen (``presenter-end`` uses one to end the meeting early).

``agent_script`` renders one role's part as the JSON its workspace carries (names, not
roles: the agent needs nothing else).
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from examples.docker_demo.breaker import BreakerConfig
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.settings import ENV_VARS

SCENARIOS_DIR: Final = Path(__file__).resolve().parent / "scenarios"
DEFAULT_SCENARIO: Final = "happy"
SCRIPT_SCHEMA: Final = 1
MAX_DELAY_S: Final = 600.0


class ScenarioError(ValueError):
    """A scenario file is missing or malformed; the message names the file and the field."""


class Expect(StrEnum):
    VERDICT = "verdict"
    HARD_CAP = "hard_cap"
    WALL_CLOCK = "wall_clock"
    PRESENTER_END = "presenter_end"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Turn(_Strict):
    say: str = Field(min_length=1)
    mention: tuple[Role, ...] = ()
    look_up: tuple[Role, ...] = ()
    add: tuple[Role, ...] = ()
    delay_s: float = Field(default=0.0, ge=0.0, le=MAX_DELAY_S)


class RoleScript(_Strict):
    turns: tuple[Turn, ...] = ()
    after: Literal["silent", "repeat"] = "silent"
    repeat_from: int = Field(default=0, ge=0)
    on_human: Turn | None = None

    @field_validator("repeat_from")
    @classmethod
    def _within(cls, value: int, info: ValidationInfo) -> int:
        turns = info.data.get("turns", ())
        if turns and value >= len(turns):
            raise ValueError(f"must point at one of the {len(turns)} turns, got {value}")
        return value


class PresenterCue(_Strict):
    after_messages: int = Field(ge=1)
    say: str = Field(min_length=1)


class Scenario(_Strict):
    schema_version: Literal["1"]
    name: str
    summary: str
    expect: Expect
    breaker: dict[str, float | int | bool] = {}
    roles: dict[Role, RoleScript]
    presenter: tuple[PresenterCue, ...] = ()

    @field_validator("breaker")
    @classmethod
    def _known_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(ENV_VARS))
        if unknown:
            raise ValueError(f"unknown breaker field(s) {unknown}; known: {sorted(ENV_VARS)}")
        dataclasses.replace(BreakerConfig(), **value)  # a bad value or combination raises
        return value

    @field_validator("roles")
    @classmethod
    def _every_role(cls, value: dict[Role, RoleScript]) -> dict[Role, RoleScript]:
        missing = [role.value for role in Role if role not in value]
        if missing:
            raise ValueError(f"every role needs a script; missing {missing}")
        return value

    def breaker_env(self) -> dict[str, str]:
        """The overrides as ``DEMO_*`` variables, for ``breaker_config_from_env``."""
        return {ENV_VARS[name]: str(value).lower() for name, value in self.breaker.items()}


def available() -> list[str]:
    return sorted(path.stem for path in SCENARIOS_DIR.glob("*.yaml"))


def load(name: str, *, directory: Path = SCENARIOS_DIR) -> Scenario:
    """The scenario called ``name`` (a file stem in ``directory``)."""
    path = directory / f"{name}.yaml"
    if not name or "/" in name or not path.is_file():
        choices = ", ".join(available()) if directory == SCENARIOS_DIR else "(see the dir)"
        raise ScenarioError(f"no scenario {name!r}; choose one of {choices}")
    try:
        scenario = Scenario.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (yaml.YAMLError, ValidationError) as exc:
        raise ScenarioError(f"scenario {path} is not valid: {exc}") from None
    if scenario.name != name:
        raise ScenarioError(f"scenario {path} calls itself {scenario.name!r}; make it {name!r}")
    return scenario


def _render_turn(turn: Turn, fill: dict[str, str]) -> dict[str, Any]:
    return {
        "say": turn.say.format_map(fill),
        "mention": [CAST[role].name for role in turn.mention],
        "look_up": [CAST[role].name for role in turn.look_up],
        "add": [CAST[role].name for role in turn.add],
        "delay_s": turn.delay_s,
    }


def agent_script(scenario: Scenario, role: Role, *, topic: str) -> dict[str, Any]:
    """The JSON one agent's workspace carries: its name and its rendered turns."""
    fill = {"topic": topic, **{r.value: m.name for r, m in CAST.items()}}
    script = scenario.roles[role]
    return {
        "schema": SCRIPT_SCHEMA,
        "scenario": scenario.name,
        "role": role.value,
        "name": CAST[role].name,
        "turns": [_render_turn(turn, fill) for turn in script.turns],
        "after": script.after,
        "repeat_from": script.repeat_from,
        "on_human": None if script.on_human is None else _render_turn(script.on_human, fill),
    }


def presenter_lines(scenario: Scenario, *, topic: str) -> list[PresenterCue]:
    fill = {"topic": topic, **{r.value: m.name for r, m in CAST.items()}}
    return [cue.model_copy(update={"say": cue.say.format_map(fill)}) for cue in scenario.presenter]
