"""Scripts: YAML data files that decide what the stub answers, one file per agent.

A file describes one agent (persona). The same rules can later drive a scripted agent
without a model (a rule on the incoming room message, a reply that posts text or calls a
Band tool), so nothing in the schema is specific to one wire API. Schema, version 1:

    version: 1                  # optional; 1 is the only version
    agent: pm                   # optional; default: the file name without .yaml/.yml
    description: The PM         # optional; shown on the turns page
    models: [stub-pm]           # optional: model names that select this script
    rules:                      # tried in order; the first whose `when` holds answers
      - name: greet             # optional label for logs and turns (default rules[N])
        when:                   # all given conditions must hold; an empty `when` always holds
          tools_offered: [band_send_message]  # each name is offered (see tool names)
          message: '(?i)hello'  # regex searched in the last user message's text
          last_tool: band_send_message        # the tool whose result came last
          last_tool_result: 'ok'              # regex searched in the last tool result
          new_turn: true        # true: the last input item is not a tool result; false: it is
          line: 2               # the message is the agent's 2nd scripted line (needs `lines`)
        reply:                  # text, a tool call, or both (text first)
          text: "Hello from {agent}, turn {turn}"
          tool: band_send_message
          arguments: {content: "Hi #{turn}"}
    default:                    # optional: the reply when no rule holds; without one an
      text: "no rule matched"   # unmatched request gets a 400 in the provider's error shape
    lines:                      # optional: number the messages the agent answers
      peers: [Sam (Dev)]        # senders whose every message takes the next line
    x-notes: anything           # top-level keys starting with `x-` are ignored

**Lines** (`bandkit.llm.lines`): with a `lines` block each new incoming message (the sender
is its last `[Name]: ` tag) from a peer, and the first from anyone else, takes the next line
number from 1; later messages from non-peers get line 0. `when: {line: N}` and the
`{line}` placeholder use it; every request of one turn answers the same line. One scenario
can so drive a model-less scripted agent and a real framework against this stub alike.

Regexes use Python syntax, are searched (not anchored) and `.` matches newlines; add `(?i)`
for case-insensitive. `message` and `last_tool_result` fail when the conversation has no
user message or no tool result.

**Tool names**: a name matches an offered tool of that exact name or one ending in
`__<name>` (an MCP tool: the Claude CLI offers Band's `band_send_message` as
`mcp__band__band_send_message`). A reply's `tool` is sent under the offered tool's full
name, so one script serves every adapter.

**Placeholders** in `text` and in every string inside `arguments`: `{agent}`, `{model}`,
`{turn}` (this agent's request count, from 1), `{request}` (the stub's request count),
`{line}` (the line number, with `lines`),
`{message}`, `{last_tool_result}`, and the named groups `(?P<name>...)` of the `message`
and `last_tool_result` regexes. Other `{...}` stay as written. Scripted replies that
must differ per turn (a client that drops a repeated identical message) use `{turn}`.

Recipes:
- End the turn after a tool call, or the agent calls it again:
  `{when: {new_turn: false}, reply: {text: "Done (turn {turn})."}}`.
- The Claude CLI keeps MCP tools behind its `ToolSearch` unless `ENABLE_TOOL_SEARCH=false`:
  first `{when: {tools_offered: [ToolSearch], new_turn: true}, reply: {tool: ToolSearch,
  arguments: {query: "select:mcp__band__band_send_message"}}}`, then
  `{when: {last_tool: ToolSearch}, reply: {tool: band_send_message, arguments: {...}}}`.
- A catch-all `default` keeps side requests (titles, summaries) from failing the turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bandkit.llm.conversation import Conversation
from bandkit.llm.errors import ScriptError

SUFFIXES = (".yaml", ".yml")
AGENT_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@functools.lru_cache(maxsize=1024)
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source, re.DOTALL)


def _check_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            _pattern(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression ({exc})") from None
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class When(_Strict):
    tools_offered: list[str] = Field(default_factory=list)
    message: str | None = None
    last_tool: str | None = None
    last_tool_result: str | None = None
    new_turn: bool | None = None
    line: int | None = Field(default=None, ge=0)

    @field_validator("message", "last_tool_result")
    @classmethod
    def _regexes(cls, value: str | None) -> str | None:
        return _check_regex(value)


class Reply(_Strict):
    text: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _some_reply(self) -> Reply:
        if self.tool is None and not self.text:
            raise ValueError("a reply needs `text` or `tool` (with optional `arguments`)")
        if self.tool is None and self.arguments:
            raise ValueError("`arguments` needs a `tool`")
        if self.tool is not None and not self.tool:
            raise ValueError("`tool` is empty")
        return self


class Rule(_Strict):
    name: str | None = None
    when: When = Field(default_factory=When)
    reply: Reply


class Lines(_Strict):
    peers: list[str] = Field(default_factory=list)


class Script(_Strict):
    version: int = 1
    agent: str = Field(pattern=AGENT_NAME)
    description: str = ""
    models: list[str] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    default: Reply | None = None
    lines: Lines | None = None

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"version {value} is unknown; this stub reads version 1")
        return value

    @model_validator(mode="after")
    def _answers_something(self) -> Script:
        if not self.rules and self.default is None:
            raise ValueError("a script needs `rules` or a `default`")
        if self.lines is None and any(rule.when.line is not None for rule in self.rules):
            raise ValueError("`when.line` needs a top-level `lines` block")
        return self

    def decide(
        self, conv: Conversation, *, turn: int, request: int, line: int | None = None
    ) -> Decision | None:
        """The reply of the first rule that holds (else the default); None if neither.
        `line` is the message's line number (`bandkit.llm.lines`), None without `lines`."""
        for index, rule in enumerate(self.rules):
            if rule.when.line is not None and rule.when.line != line:
                continue
            captures = _holds(rule.when, conv)
            if captures is not None:
                return _decision(
                    self,
                    rule.name or f"rules[{index}]",
                    rule.reply,
                    conv,
                    captures,
                    turn=turn,
                    request=request,
                    line=line,
                )
        if self.default is not None:
            return _decision(
                self, "default", self.default, conv, {}, turn=turn, request=request, line=line
            )
        return None


@dataclass(frozen=True)
class Decision:
    """A rendered reply: what the wire modules turn into text and tool-call blocks."""

    rule: str
    text: str | None
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    tool_offered: bool = True


def offered_name(wanted: str, offered: Iterable[str]) -> str | None:
    """The offered tool `wanted` names: the same name, or one ending in `__<wanted>`."""
    names = list(offered)
    if wanted in names:
        return wanted
    return next((name for name in names if name.endswith(f"__{wanted}")), None)


def _search(source: str | None, text: str | None, captures: dict[str, str]) -> bool:
    if source is None:
        return True
    if text is None:
        return False
    found = _pattern(source).search(text)
    if found is None:
        return False
    captures.update({k: v for k, v in found.groupdict().items() if v is not None})
    return True


def _holds(when: When, conv: Conversation) -> dict[str, str] | None:
    """The named captures when every condition of `when` holds, else None."""
    if any(offered_name(name, conv.tools) is None for name in when.tools_offered):
        return None
    if when.new_turn is not None and when.new_turn != conv.new_turn:
        return None
    if when.last_tool is not None and (
        conv.last_tool is None or offered_name(when.last_tool, [conv.last_tool]) is None
    ):
        return None
    captures: dict[str, str] = {}
    if not _search(when.message, conv.message, captures):
        return None
    if not _search(when.last_tool_result, conv.last_tool_result, captures):
        return None
    return captures


def _fill(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {key: _fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    return value


def _decision(
    script: Script,
    label: str,
    reply: Reply,
    conv: Conversation,
    captures: Mapping[str, str],
    *,
    turn: int,
    request: int,
    line: int | None = None,
) -> Decision:
    values = {
        "message": conv.message or "",
        "last_tool_result": conv.last_tool_result or "",
        **captures,
        "agent": script.agent,
        "model": conv.model,
        "turn": str(turn),
        "request": str(request),
        **({} if line is None else {"line": str(line)}),
    }
    tool = None
    offered = True
    if reply.tool is not None:
        resolved = offered_name(reply.tool, conv.tools)
        offered = resolved is not None
        tool = resolved or reply.tool
    return Decision(
        rule=label,
        text=_fill(reply.text, values) if reply.text else None,
        tool=tool,
        arguments=_fill(reply.arguments, values),
        tool_offered=offered,
    )


# --- loading -------------------------------------------------------------------------------


def _where(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _explain(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        loc = [p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        problems.append(f"{_where(loc)}: {message}")
    more = len(exc.errors()) - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def parse_script(data: Any, source: str, *, default_agent: str | None = None) -> Script:
    """One script from YAML-loaded `data`; ScriptError naming `source` if it is invalid."""
    if not isinstance(data, dict):
        raise ScriptError(f"script {source}: the top level must be a mapping (agent, rules, ...)")
    data = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
    if "agent" not in data and default_agent is not None:
        data["agent"] = default_agent
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        raise ScriptError(f"script {source}: {_explain(exc)}") from None


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not found:
            raise ScriptError(f"no *.yaml script in {path}; add one file per agent")
        return found
    if path.is_file():
        return [path]
    raise ScriptError(f"script {path} does not exist; pass a YAML file or a directory of them")


def _read(path: Path) -> Script:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"cannot read script {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ScriptError(f"script {path}{where}: {problem}") from None
    return parse_script(data, str(path), default_agent=path.stem)


@dataclass(frozen=True)
class ScriptSet:
    """The loaded scripts, by agent name, and the model names that select them."""

    agents: dict[str, Script]
    sources: dict[str, str]
    by_model: dict[str, str]

    @classmethod
    def of(cls, scripts: Sequence[tuple[str, Script]]) -> ScriptSet:
        """From (source, script) pairs; ScriptError on a repeated agent or model name."""
        if not scripts:
            raise ScriptError("no script given; pass --script FILE|DIR")
        agents: dict[str, Script] = {}
        sources: dict[str, str] = {}
        by_model: dict[str, str] = {}
        for source, script in scripts:
            if script.agent in agents:
                raise ScriptError(
                    f"agent {script.agent!r} is scripted twice ({sources[script.agent]} and "
                    f"{source}); give each file its own `agent`"
                )
            agents[script.agent] = script
            sources[script.agent] = source
        for source, script in scripts:
            for model in script.models:
                owner = by_model.get(model) or (model if model in agents else None)
                if owner is not None and owner != script.agent:
                    raise ScriptError(
                        f"model {model!r} in {source} already selects agent {owner!r}"
                    )
                by_model[model] = script.agent
        return cls(agents, sources, by_model)

    @classmethod
    def from_data(cls, scripts: Sequence[Mapping[str, Any]]) -> ScriptSet:
        """From in-memory mappings (tests, embedding); each needs its `agent`."""
        return cls.of(
            [
                (f"<script {i}>", parse_script(dict(data), f"<script {i}>"))
                for i, data in enumerate(scripts)
            ]
        )

    def model_names(self) -> list[str]:
        """Every name `/v1/models` lists: each agent's name and its model names."""
        names: list[str] = []
        for agent, script in self.agents.items():
            names += [agent, *(m for m in script.models if m != agent)]
        return names

    def select(
        self, *, header: str | None, key_agent: str | None, model: str | None
    ) -> tuple[Script | None, str]:
        """(script, how it was chosen). See `bandkit.llm` for the order."""
        if header:
            return self.agents.get(header), "header"
        if key_agent:
            return self.agents.get(key_agent), "key"
        if model:
            agent = self.by_model.get(model) or (model if model in self.agents else None)
            if agent is not None:
                return self.agents[agent], "model"
        if len(self.agents) == 1:
            return next(iter(self.agents.values())), "only script"
        return None, "none"


def load_scripts(paths: Sequence[Path]) -> ScriptSet:
    """Every script under `paths` (files, or directories of *.yaml / *.yml)."""
    if not paths:
        raise ScriptError("no script given; pass --script FILE|DIR")
    return ScriptSet.of([(str(f), _read(f)) for path in paths for f in _files(path)])
