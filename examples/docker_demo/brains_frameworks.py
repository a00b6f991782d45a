"""The stub and real brains: band-sdk's real framework adapters, one per role.

The demo stages this file beside ``main.py`` (``agent_main.py``) when ``script.json`` says
``"brains": "stub"`` or ``"real"``; it runs inside the sandbox with the workspace's venv,
which then holds the role's ``brains`` dependency group. What each role runs, and what
the host puts in its sandbox's environment (``bandkit.demo.brains`` writes it):

* pm: ``ClaudeSDKAdapter`` (the claude CLI bundled in the claude-agent-sdk wheel).
  ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_PROXY_KEY`` (a placeholder: the credential proxy puts
  the real key on the wire), ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
  ``ENABLE_TOOL_SEARCH=false``; optional ``PM_MODEL``.
* dev: ``CodexAdapter`` (``codex app-server``). ``OPENAI_BASE_URL``, ``OPENAI_PROXY_KEY``,
  ``CODEX_COMMAND`` (the whole command, ``<codex> app-server --listen stdio://``; unset:
  ``codex`` from PATH); optional ``DEV_MODEL``
  (default ``stub-model``: a name codex does not know keeps the Band tools top-level).
  ``$CODEX_HOME/config.toml`` is written here: a custom provider at ``OPENAI_BASE_URL``
  (``wire_api = "responses"``; codex ignores ``OPENAI_BASE_URL`` itself), plugins, remote
  plugins, apps and analytics off.
* architect: ``CrewAIAdapter``. ``OPENAI_BASE_URL``, ``OPENAI_PROXY_KEY``,
  ``CREWAI_DISABLE_TELEMETRY=true``, ``OTEL_SDK_DISABLED=true``,
  ``CREWAI_TRACING_ENABLED=false``; optional ``ARCHITECT_MODEL``.

``*_PROXY_KEY`` is copied into the variable the client reads (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``), as upstream's kit does (sbx reserves those names). The clients write
state (``~/.claude``, ``$CODEX_HOME``, ``./.band-workspaces``): when ``$HOME`` is not
writable (the local runtime), a private temporary home is made, used as the working
directory too, and removed when the agent stops. ``prompt.md`` is the persona.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

KEY_COPIES = {"ANTHROPIC_PROXY_KEY": "ANTHROPIC_API_KEY", "OPENAI_PROXY_KEY": "OPENAI_API_KEY"}
PROMPT_FILE = "prompt.md"
STUB_CODEX_MODEL = "stub-model"
DEFAULT_CREWAI_MODEL = "gpt-4.1-mini"
CODEX_PROVIDER = "band-demo"
NEEDS = {
    "pm": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
    "dev": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    "architect": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
}


class BrainsError(Exception):
    """The sandbox lacks what the framework brains need; the message says what."""


def copy_keys(env: MutableMapping[str, str]) -> None:
    for source, target in KEY_COPIES.items():
        if env.get(source):
            env[target] = env[source]


def private_home(env: MutableMapping[str, str]) -> Path | None:
    """A private home when $HOME is not ours to write (returned so it is removed later)."""
    home = Path(env.get("HOME") or "/nonexistent")
    if home.is_dir() and os.access(home, os.W_OK | os.X_OK):
        return None
    made = Path(tempfile.mkdtemp(prefix="band-demo-home-"))
    env["HOME"] = str(made)
    return made


def codex_config(base_url: str, model: str) -> str:
    """`$CODEX_HOME/config.toml`: one custom provider, nothing that calls out."""
    return "\n".join(
        [
            f"model = {json.dumps(model)}",
            f"model_provider = {json.dumps(CODEX_PROVIDER)}",
            "",
            f"[model_providers.{CODEX_PROVIDER}]",
            'name = "Band demo model endpoint"',
            f"base_url = {json.dumps(base_url)}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            "",
            "[features]",
            "plugins = false",
            "remote_plugin = false",
            "apps = false",
            "",
            "[analytics]",
            "enabled = false",
            "",
        ]
    )


def prepare(env: MutableMapping[str, str], role: str) -> Path | None:
    """Set up `env` (os.environ) for `role`'s client; returns a home to remove at exit."""
    copy_keys(env)
    if role not in NEEDS:
        raise BrainsError(f"no framework brain for role {role!r}")
    missing = [name for name in NEEDS[role] if not env.get(name)]
    if missing:
        raise BrainsError(f"{role}: {', '.join(missing)} not set (the demo sets them)")
    home = private_home(env)
    os.chdir(env["HOME"])
    if role == "dev":
        codex_home = Path(env.setdefault("CODEX_HOME", str(Path(env["HOME"]) / ".codex")))
        codex_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        model = env.setdefault("DEV_MODEL", STUB_CODEX_MODEL)
        (codex_home / "config.toml").write_text(codex_config(env["OPENAI_BASE_URL"], model))
        env.setdefault("CODEX_MODEL", model)
    return home


def remove_home(home: Path | None) -> None:
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


def build_framework_adapter(role: str, persona: str, env: Mapping[str, str]) -> Any:
    """The role's real band-sdk adapter, configured from `env` (after `prepare`)."""
    if role == "pm":
        from band.adapters.claude_sdk import ClaudeSDKAdapter, ClaudeSDKAdapterConfig

        return ClaudeSDKAdapter(
            ClaudeSDKAdapterConfig(model=env.get("PM_MODEL") or None, custom_section=persona)
        )
    if role == "dev":
        from band.adapters.codex import CodexAdapter, CodexAdapterConfig

        return CodexAdapter(CodexAdapterConfig(model=env["DEV_MODEL"], custom_section=persona))
    from band.adapters.crewai import CrewAIAdapter, CrewAIAdapterConfig

    return CrewAIAdapter(
        CrewAIAdapterConfig(
            model=env.get("ARCHITECT_MODEL") or DEFAULT_CREWAI_MODEL, custom_section=persona
        )
    )


def persona(directory: Path) -> str:
    try:
        return (directory / PROMPT_FILE).read_text(encoding="utf-8")
    except OSError:
        return ""
