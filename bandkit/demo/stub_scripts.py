"""A scenario as LLM stub scripts: what the stub brains' model answers, per role.

One scenario file drives both brains. ``scenario.agent_script`` renders a role's lines
(names filled in) for the scripted brain; ``stub_script`` turns the same rendering into a
``bandkit.llm`` script (schema version 1) for the role's real framework adapter:

* ``lines.peers`` are the other two cast members, so the stub numbers the incoming
  messages as ``brain.Cursor`` does: each peer message, and the first human one, takes
  the next line; later human messages are line 0 (the ``on_human`` line);
* line N plays turn N as a chain of Band tool calls, one per request, each rule keyed on
  the line and the tool whose result came last: ``band_lookup_peers`` (``look_up``),
  ``band_add_participant`` for each name in ``add``, ``band_get_participants`` when the
  line names nobody (it goes to the room's humans, as in ``brain.play``), then
  ``band_send_message`` with the text and the mentions; once that result is back, a
  short closing text ends the turn. A line past the script's end replays from
  ``repeat_from`` (``after: repeat``, unrolled up to ``REPEAT_LINES`` lines, each
  replayed message tagged with its line number: the Claude adapter drops a repeated
  identical message); any other message gets ``band_no_reply``;
* ``delay_s`` is not played (the stub answers at once).
"""

from __future__ import annotations

from typing import Any, Final

from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.scenario import Scenario, agent_script

REPEAT_LINES: Final = 40
HUMAN_ID: Final = r'"id":\s*"(?P<human>[^"]+)"[^{}]*?"type":\s*"User"'
HUMAN_ID_AFTER: Final = r'"type":\s*"User"[^{}]*?"id":\s*"(?P<human>[^"]+)"'


def _text(turn: dict[str, Any], tag: str) -> str:
    return " ".join([*(f"@{name}" for name in turn["mention"]), turn["say"]]) + tag


def _chain(turn: dict[str, Any], tag: str) -> list[tuple[str, dict[str, Any]]]:
    """The (tool, arguments) calls that play one turn, in order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    if turn["look_up"]:
        calls.append(("band_lookup_peers", {"page": 1, "page_size": 100}))
    calls += [("band_add_participant", {"identifier": name}) for name in turn["add"]]
    mentions: list[str] = list(turn["mention"])
    if not mentions:
        calls.append(("band_get_participants", {}))
        mentions = ["{human}"]
    calls.append(("band_send_message", {"content": _text(turn, tag), "mentions": mentions}))
    return calls


SILENT: Final = [
    {
        "name": "silent",
        "when": {"new_turn": True},
        "reply": {"tool": "band_no_reply", "arguments": {"reason": "nothing to add"}},
    },
    {
        "name": "silent-done",
        "when": {"last_tool": "band_no_reply"},
        "reply": {"text": "Nothing to add ({line})."},
    },
]


def _rules_for(line: int, turn: dict[str, Any], tag: str) -> list[dict[str, Any]]:
    name = f"line-{line}"
    rules: list[dict[str, Any]] = []
    previous: str | None = None
    for tool, arguments in _chain(turn, tag):
        when: dict[str, Any] = {"line": line}
        if previous is None:
            when["new_turn"] = True
        else:
            when["last_tool"] = previous
        if previous == "band_get_participants":
            for index, pattern in enumerate((HUMAN_ID, HUMAN_ID_AFTER)):
                rules.append(
                    {
                        "name": f"{name}-{tool}-{index}",
                        "when": {**when, "last_tool_result": pattern},
                        "reply": {"tool": tool, "arguments": arguments},
                    }
                )
        else:
            rules.append(
                {
                    "name": f"{name}-{tool}",
                    "when": when,
                    "reply": {"tool": tool, "arguments": arguments},
                }
            )
        previous = tool
    rules.append(
        {
            "name": f"{name}-done",
            "when": {"line": line, "last_tool": "band_send_message"},
            "reply": {"text": f"Posted line {line}."},
        }
    )
    return rules


def stub_script(scenario: Scenario, role: Role, *, topic: str) -> dict[str, Any]:
    """The stub script (as data, ready for YAML) that plays `role`'s part."""
    script = agent_script(scenario, role, topic=topic)
    turns: list[dict[str, Any]] = script["turns"]
    rules: list[dict[str, Any]] = []
    if script["on_human"] is not None:
        rules += _rules_for(0, script["on_human"], "")
    count = len(turns)
    for line in range(1, count + 1):
        rules += _rules_for(line, turns[line - 1], "")
    if script["after"] == "repeat" and turns:
        start = script["repeat_from"]
        for line in range(count + 1, REPEAT_LINES + 1):
            turn = turns[start + (line - count - 1) % (count - start)]
            rules += _rules_for(line, turn, f" (line {line})")
    rules += SILENT  # past the end (`after: silent`), or a human with no `on_human` line
    return {
        "version": 1,
        "agent": role.value,
        "description": f"{CAST[role].name}: scenario {scenario.name}",
        "lines": {"peers": [member.name for r, member in CAST.items() if r is not role]},
        "rules": rules,
        "default": {"text": "Nothing scripted for this request ({request})."},
    }
