"""Shared builders for launcher tests: canaries, band.yaml mappings, workspace boxes,
resolved launch records."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from launcher.config import Endpoints
from launcher.constants import LOG_FILENAME, PROXY_MANAGED
from launcher.handoff import ResolvedLaunch
from launcher.stamp import base_interpreter

CANARY = "canary-sk-4f1e9c0b7d2a6e35"  # a planted secret: must never appear in any output
CANARY_FILE = "canary-file-9b8a7c6d5e4f3021"  # a second one, only ever in a secrets file

TRIVIAL_PYPROJECT = """\
[project]
name = "trivial-agent"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []

[tool.uv]
package = false
"""

# The agent used by end-to-end tests: prints one JSON line describing what it got
# (names, hashes, pid), then optionally waits for SIGTERM.
TRIVIAL_MAIN = """\
import hashlib, json, os, signal, sys, time

def digest(name):
    value = os.environ.get(name)
    return hashlib.sha256(value.encode()).hexdigest() if value else None

report = {
    "pid": os.getpid(),
    "cwd": os.getcwd(),
    "executable": sys.executable,
    "argv": sys.argv,
    "agent_id": os.environ.get("BAND_AGENT_ID"),
    "rest": os.environ.get("BAND_REST_URL"),
    "ws": os.environ.get("BAND_WS_URL"),
    "home": os.environ.get("HOME"),
    "digests": {n: digest(n) for n in (
        "BAND_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
        "COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")},
}
print("AGENT " + json.dumps(report), flush=True)
if os.environ.get("AGENT_WAIT_FOR_SIGTERM") == "1":
    # The handler only notes the signal: it may arrive while the print below is still
    # flushing, and a print inside the handler would then be a reentrant write.
    got = []
    signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    print("AGENT waiting", flush=True)
    while not got:
        time.sleep(0.05)
    print("AGENT got SIGTERM", flush=True)
    sys.exit(0)
"""


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def band_config(home: Path, **sections: Any) -> dict[str, Any]:
    """A valid band.yaml mapping with runtime paths under `home`; sections override."""
    config: dict[str, Any] = {
        "schemaVersion": "1",
        "agent": {"id": "agent-123", "entrypoint": "main.py"},
        "credentials": {"source": "proxy-managed"},
        "runtime": {
            "environmentPath": str(home / "venv"),
            "statePath": str(home / "state"),
            "cachePath": str(home / "cache"),
            "logPath": str(home / "logs"),
        },
    }
    for key, value in sections.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def write_config(workspace: Path, config: dict[str, Any] | str) -> Path:
    path = workspace / "band.yaml"
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    return path


def write_project(project: Path, *, lock_source: Path | None = None) -> None:
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text(TRIVIAL_PYPROJECT)
    (project / "main.py").write_text(TRIVIAL_MAIN)
    if lock_source is not None:
        shutil.copy(lock_source, project / "uv.lock")


@dataclass
class Box:
    """One agent's world: the workspace (`ws`) and its sandbox-owned home (`home`)."""

    root: Path
    ws: Path
    home: Path

    def config(self, **sections: Any) -> dict[str, Any]:
        return band_config(self.home, **sections)

    def write(self, config: dict[str, Any] | str) -> Path:
        return write_config(self.ws, config)

    def log_text(self) -> str:
        path = self.home / "logs" / LOG_FILENAME
        return path.read_text() if path.exists() else ""

    def all_written_text(self) -> str:
        """Every file the launcher may have written under the sandbox-owned home,
        except the venv and the uv cache (third-party content)."""
        chunks = []
        for sub in ("state", "logs"):
            for path in sorted((self.home / sub).rglob("*")):
                if path.is_file():
                    chunks.append(path.read_text(errors="replace"))
        return "\n".join(chunks)


def base_env(box: Box, **extra: str) -> dict[str, str]:
    env = {
        "WORKSPACE_DIR": str(box.ws),
        "BAND_API_KEY": PROXY_MANAGED,
        "BAND_SDK_HOME": str(box.root / "sdk-home"),
    }
    env.update(extra)
    return env


def resolved(root: Path, **changes: Any) -> ResolvedLaunch:
    """A `ResolvedLaunch` for a minimal project under `root`, with `changes` applied."""
    project = root / "ws"
    project.mkdir(exist_ok=True)
    (project / "pyproject.toml").write_text("[project]\nname='x'\nversion='0'\n")
    (project / "main.py").write_text("print('hi')\n")
    values: dict[str, Any] = {
        "workspace": project,
        "config_path": project / "band.yaml",
        "config_digest": "d" * 64,
        "config_revalidated": True,
        "project": project,
        "entrypoint": project / "main.py",
        "environment_path": root / "home" / "venv",
        "state_path": root / "home" / "state",
        "cache_path": root / "home" / "cache",
        "log_path": root / "home" / "logs",
        "sdk_home": Path("/opt/band"),
        "sdk_uv": "",
        "interpreter": base_interpreter(),
        "agent_id": "agent-1",
        "endpoints": Endpoints("https://r.example", "wss://w.example/s", insecure=False),
        "credential_source": None,
        "repo": None,
        "credentials": {"BAND_API_KEY": "sk-live-000", "GH_TOKEN": "gh"},
        "stamp": {},
    }
    values.update(changes)
    return ResolvedLaunch(**values)
