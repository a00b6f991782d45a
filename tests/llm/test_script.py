"""Script rules: conditions, first match, default, placeholders, loading errors, selection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bandkit.llm.conversation import Conversation
from bandkit.llm.errors import ScriptError
from bandkit.llm.script import ScriptSet, load_scripts, parse_script
from tests.llm.conftest import SCRIPTS


def conv(**overrides: Any) -> Conversation:
    fields: dict[str, Any] = {
        "model": "m",
        "stream": False,
        "tools": ("band_send_message",),
        "message": "hello",
        "last_tool": None,
        "last_tool_result": None,
        "new_turn": True,
        "items": 1,
    }
    fields.update(overrides)
    return Conversation(**fields)


def script(**data: Any) -> Any:
    return parse_script({"agent": "a", **data}, "<test>")


RULES = [
    {
        "name": "tool-done",
        "when": {"new_turn": False, "last_tool_result": "(?P<n>\\d+) rows"},
        "reply": {"text": "got {n} rows"},
    },
    {
        "name": "needs-search",
        "when": {"tools_offered": ["search"]},
        "reply": {
            "tool": "search",
            "arguments": {"q": "{message}", "nested": [{"turn": "{turn}"}], "n": 3},
        },
    },
    {"name": "greet", "when": {"message": "(?i)^HEL+O"}, "reply": {"text": "hi #{turn} {unknown}"}},
]


def test_first_matching_rule_wins_and_fills_placeholders() -> None:
    s = script(rules=RULES, default={"text": "fallback {agent}/{model}/{request}"})
    greet = s.decide(conv(), turn=4, request=9)
    assert greet is not None
    assert greet.rule == "greet"
    assert greet.text == "hi #4 {unknown}"  # unknown names stay as written

    both = s.decide(conv(tools=("mcp__x__search", "band_send_message")), turn=1, request=1)
    assert both is not None
    assert both.rule == "needs-search"
    assert both.tool == "mcp__x__search"  # the offered (suffixed) name is used
    assert both.arguments == {"q": "hello", "nested": [{"turn": "1"}], "n": 3}

    done = s.decide(conv(new_turn=False, last_tool_result="42 rows\nmore"), turn=2, request=3)
    assert done is not None
    assert done.text == "got 42 rows"

    other = s.decide(conv(message="bye"), turn=1, request=7)
    assert other is not None
    assert other.rule == "default"
    assert other.text == "fallback a/m/7"


def test_conditions_that_fail() -> None:
    s = script(
        rules=[
            {"when": {"message": "x"}, "reply": {"text": "message"}},
            {"when": {"last_tool_result": "."}, "reply": {"text": "result"}},
            {"when": {"last_tool": "search"}, "reply": {"text": "last tool"}},
            {"when": {"tools_offered": ["a", "b"]}, "reply": {"text": "both tools"}},
            {"when": {"new_turn": False}, "reply": {"text": "after a tool"}},
        ]
    )
    assert s.decide(conv(message=None), turn=1, request=1) is None  # no message at all
    assert s.decide(conv(tools=("a",)), turn=1, request=1) is None  # b not offered
    hit = s.decide(
        conv(new_turn=False, last_tool="mcp__band__search", last_tool_result=""), turn=1, request=1
    )
    assert hit is not None
    assert hit.text == "last tool"
    assert s.decide(conv(new_turn=False, last_tool="other"), turn=1, request=1) is not None


def test_a_tool_that_was_not_offered_is_flagged() -> None:
    s = script(rules=[{"reply": {"tool": "band_send_message"}}])
    decision = s.decide(conv(tools=()), turn=1, request=1)
    assert decision is not None
    assert decision.tool == "band_send_message"
    assert decision.tool_offered is False


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"rules": [{"when": {"tool_offered": ["x"]}, "reply": {"text": "t"}}]},
            "rules[0].when.tool_offered: unknown key",
        ),
        (
            {"rules": [{"when": {"message": "("}, "reply": {"text": "t"}}]},
            "rules[0].when.message: Value error, not a valid regular expression",
        ),
        ({"rules": [{"reply": {}}]}, "rules[0].reply: Value error, a reply needs"),
        ({"rules": [{"reply": {"text": "t", "arguments": {"a": 1}}}]}, "`arguments` needs"),
        ({"default": {"text": "t"}, "version": 2}, "version: Value error, version 2 is unknown"),
        ({}, "a script needs `rules` or a `default`"),
        ({"agent": "bad name", "default": {"text": "t"}}, "agent: String should match"),
        ({"rules": "nope"}, "rules: Input should be a valid list"),
    ],
)
def test_invalid_scripts_name_the_file_and_field(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script({"agent": "a", **data}, "pm.yaml")
    assert str(caught.value).startswith("script pm.yaml: ")
    assert problem in str(caught.value)


def test_loading_files_and_directories(tmp_path: Path) -> None:
    loaded = load_scripts([SCRIPTS])
    assert sorted(loaded.agents) == ["architect", "dev", "pm"]
    assert loaded.by_model["stub-pm"] == "pm"

    (tmp_path / "solo.yml").write_text("default: {text: hi}\n")
    solo = load_scripts([tmp_path / "solo.yml"])
    assert list(solo.agents) == ["solo"]  # the agent defaults to the file name

    (tmp_path / "broken.yaml").write_text("rules: [\n")
    with pytest.raises(ScriptError, match=r"broken.yaml at line \d+"):
        load_scripts([tmp_path])
    with pytest.raises(ScriptError, match="does not exist"):
        load_scripts([tmp_path / "missing.yaml"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ScriptError, match=r"no \*.yaml script"):
        load_scripts([empty])
    with pytest.raises(ScriptError, match="scripted twice"):
        load_scripts([SCRIPTS / "pm.yaml", SCRIPTS / "pm.yaml"])


def test_model_names_must_not_collide() -> None:
    with pytest.raises(ScriptError, match="already selects agent"):
        ScriptSet.from_data(
            [
                {"agent": "a", "models": ["m"], "default": {"text": "a"}},
                {"agent": "b", "models": ["m"], "default": {"text": "b"}},
            ]
        )
    with pytest.raises(ScriptError, match="already selects agent 'a'"):
        ScriptSet.from_data(
            [
                {"agent": "a", "default": {"text": "a"}},
                {"agent": "b", "models": ["a"], "default": {"text": "b"}},
            ]
        )


def test_selection_order() -> None:
    scripts = load_scripts([SCRIPTS])

    def pick(**kw: Any) -> tuple[str | None, str]:
        chosen, how = scripts.select(**{"header": None, "key_agent": None, "model": None, **kw})
        return (chosen.agent if chosen else None), how

    assert pick(header="dev", key_agent="pm", model="stub-architect") == ("dev", "header")
    assert pick(key_agent="pm", model="stub-architect") == ("pm", "key")
    assert pick(model="stub-architect") == ("architect", "model")
    assert pick(model="architect") == ("architect", "model")  # the agent name works too
    assert pick(model="claude-sonnet-5-5") == (None, "none")
    assert pick(header="nobody") == (None, "header")
    solo = ScriptSet.from_data([{"agent": "only", "default": {"text": "x"}}])
    chosen, how = solo.select(header=None, key_agent=None, model="anything")
    assert chosen is not None
    assert (chosen.agent, how) == ("only", "only script")
