"""The stub brains' parts that need no agent: the scenario compiled into stub scripts, the
sandbox contract (`stub_brains`), the in-sandbox set-up (`brains_frameworks`) and staging."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from bandkit.demo import DemoError, brains
from bandkit.demo.layout import DemoLayout
from bandkit.demo.staging import AGENTS_DIR, stage
from bandkit.demo.stub_scripts import stub_script
from bandkit.llm.conversation import Conversation
from bandkit.llm.script import ScriptSet
from bandkit.manifest import Manifest
from bandkit.runtimes.base import RuntimeName
from examples.docker_demo import brains_frameworks
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.scenario import agent_script, available, load

TOOLS = (
    "band_send_message",
    "band_lookup_peers",
    "band_add_participant",
    "band_get_participants",
    "band_no_reply",
)


@pytest.mark.parametrize("name", available())
def test_every_scenario_compiles_to_valid_stub_scripts(name: str) -> None:
    scenario = load(name)
    scripts = ScriptSet.from_data([stub_script(scenario, role, topic="T") for role in Role])
    assert set(scripts.agents) == {role.value for role in Role}


def play(data: dict[str, object], line: int, results: list[str]) -> list[tuple[str, object]]:
    """Drive one turn through the stub's rules: (tool, arguments) per request, then text."""
    script = ScriptSet.from_data([data]).agents[str(data["agent"])]
    out: list[tuple[str, object]] = []
    last_tool, result = None, None
    for step in range(6):
        conv = Conversation("m", True, TOOLS, "msg", last_tool, result, step == 0, step + 1)
        decision = script.decide(conv, turn=step + 1, request=step + 1, line=line)
        assert decision is not None
        if decision.tool is None:
            out.append(("text", decision.text))
            return out
        out.append((decision.tool, decision.arguments))
        last_tool, result = decision.tool, results[step] if step < len(results) else "{}"
    raise AssertionError(f"the turn did not end: {out}")


def test_the_lines_play_the_scripted_brain_s_tool_chains() -> None:
    scenario = load("happy")
    data = stub_script(scenario, Role.PM, topic="T")
    scripted = agent_script(scenario, Role.PM, topic="T")["turns"]
    first = play(data, 1, [])
    assert first == [
        (
            "band_send_message",
            {"content": f"@Sam (Dev) {scripted[0]['say']}", "mentions": ["Sam (Dev)"]},
        ),
        ("text", "Posted line 1."),
    ]
    handoff = [tool for tool, _ in play(data, 3, [])]  # as brain.play: look up, add, mention
    assert handoff == ["band_lookup_peers", "band_add_participant", "band_send_message", "text"]
    assert [tool for tool, _ in play(data, 9, [])] == ["band_no_reply", "text"]  # past the end


def test_a_line_to_the_room_finds_the_human_first() -> None:
    data = stub_script(load("happy"), Role.DEV, topic="T")
    rules = [r for r in data["rules"] if r["when"].get("line") == 3]
    assert [r["reply"]["tool"] for r in rules[:1]] == ["band_get_participants"]
    participants = json.dumps([{"id": "u-1", "name": "Ops", "type": "User"}])
    send = [r for r in rules if r["when"].get("last_tool") == "band_get_participants"]
    script = ScriptSet.from_data([{**data, "rules": send}]).agents["dev"]
    conv = Conversation("m", True, TOOLS, "x", "band_get_participants", participants, False, 2)
    decision = script.decide(conv, turn=1, request=1, line=3)
    assert decision is not None
    assert decision.arguments["mentions"] == ["u-1"]


def test_repeated_lines_carry_their_number() -> None:
    data = stub_script(load("runaway"), Role.ARCHITECT, topic="T")
    contents = [
        r["reply"]["arguments"]["content"]
        for r in data["rules"]
        if r["reply"].get("tool") == "band_send_message"
    ]
    assert len(contents) == len(set(contents))  # the Claude adapter drops identical repeats


def test_scripted_brains_add_only_the_no_default_groups_switch(tmp_path: Path) -> None:
    with Manifest.open(tmp_path / "m.json") as manifest:
        made = brains.prepare(
            "scripted",
            layout=DemoLayout.for_run_dir(tmp_path),
            manifest=manifest,
            scenario=load("happy"),
            topic="T",
            log=print,
        )
        assert not manifest.resources
    assert made.env == {role: {"UV_NO_DEFAULT_GROUPS": "true"} for role in Role}
    assert made.secrets == {}


def test_stub_brains_are_refused_on_sbx() -> None:
    with pytest.raises(DemoError, match="does not run on sbx"):
        brains.check("stub", RuntimeName.SBX)
    brains.check("scripted", RuntimeName.SBX)


@pytest.mark.parametrize("role", [r.value for r in Role])
def test_each_workspace_locks_its_framework_in_a_default_group(role: str) -> None:
    project = tomllib.loads((AGENTS_DIR / role / "pyproject.toml").read_text())
    extra = {"pm": "claude-sdk", "dev": "codex", "architect": "crewai"}[role]
    assert project["dependency-groups"]["brains"] == [f"band-sdk[{extra}]>=6.0.1,<7"]
    assert project["tool"]["uv"]["default-groups"] == ["brains"]
    assert project["project"]["dependencies"] == ["band-sdk>=6.0.1,<7"]


def test_staging_says_which_brains_and_ships_the_framework_module(tmp_path: Path) -> None:
    with Manifest.open(tmp_path / "m.json") as manifest:
        target = stage(
            manifest,
            tmp_path / "ws",
            Role.DEV,
            load("happy"),
            topic="T",
            rest_url="http://127.0.0.1:9",
            ws_url="ws://127.0.0.1:9/api/v1/socket/websocket",
            brains="stub",
        )
    assert json.loads((target / "script.json").read_text())["brains"] == "stub"
    staged = (target / "brains_frameworks.py").read_bytes()
    assert staged == Path(brains_frameworks.__file__).read_bytes()


def test_the_sandbox_copies_placeholders_and_writes_the_codex_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {
        "HOME": str(tmp_path / "absent"),
        "OPENAI_BASE_URL": "http://127.0.0.1:7/tok/v1",
        "OPENAI_PROXY_KEY": "sk-placeholder-1",
    }
    home = brains_frameworks.prepare(env, "dev")
    try:
        assert home is not None
        assert env["HOME"] == str(home)
        assert env["OPENAI_API_KEY"] == "sk-placeholder-1"
        config = (Path(env["CODEX_HOME"]) / "config.toml").read_text()
        parsed = tomllib.loads(config)
        provider = parsed["model_providers"][parsed["model_provider"]]
        assert provider["base_url"] == env["OPENAI_BASE_URL"]
        assert provider["wire_api"] == "responses"
        assert provider["env_key"] == "OPENAI_API_KEY"
        assert parsed["features"] == {"plugins": False, "remote_plugin": False, "apps": False}
        assert parsed["analytics"] == {"enabled": False}
        assert parsed["model"] == "stub-model"
    finally:
        brains_frameworks.remove_home(home)
    assert home is not None
    assert not home.exists()


def test_the_sandbox_names_what_is_missing() -> None:
    with pytest.raises(brains_frameworks.BrainsError, match="ANTHROPIC_BASE_URL"):
        brains_frameworks.prepare({"HOME": "/nonexistent"}, "pm")
    assert CAST  # the roles the module knows are the cast's


def test_the_box_proxy_pins_the_model_endpoints_the_host_set() -> None:
    from bandkit.runtimes import boxnet

    env = {"BAND_REST_URL": "http://127.0.0.1:9", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8"}
    pinned = boxnet.pinned_endpoints(env)
    assert pinned["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8"
    assert "OPENAI_BASE_URL" not in pinned  # only what the host set
