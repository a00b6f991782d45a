"""Launcher test helpers: workspaces on disk, and the uid-1000 end-to-end harness.

Unit tests build workspaces under pytest's tmp_path and call the modules
in-process. End-to-end tests run `python -m launcher` as uid 1000 with
`setpriv`, from an image-like SDK home built once per session in a
world-readable temp dir (see bandkit.bench.launcher_sdk), because /root and
pytest's tmp dirs are 0700.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.constants import LOG_FILENAME, PROXY_MANAGED

AGENT_UID = 1000
PASSTHROUGH = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)
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
    def stop(signum, frame):
        print("AGENT got SIGTERM", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    print("AGENT waiting", flush=True)
    while True:
        time.sleep(0.05)
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


@pytest.fixture
def box(tmp_path: Path) -> Box:
    """Unit-test box (root-owned, under tmp_path) with a trivial project, no lock."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    write_project(ws)
    home.mkdir()
    return Box(root=tmp_path, ws=ws, home=home)


def base_env(box: Box, **extra: str) -> dict[str, str]:
    env = {
        "WORKSPACE_DIR": str(box.ws),
        "BAND_API_KEY": PROXY_MANAGED,
        "BAND_SDK_HOME": str(box.root / "sdk-home"),
    }
    env.update(extra)
    return env


# --------------------------------------------------------------------------- e2e


@dataclass(frozen=True)
class Harness:
    """The session's SDK home and shared assets for uid-1000 launches."""

    root: Path
    sdk_root: Path
    python: Path
    uv: Path
    lock: Path  # uv.lock of the trivial project
    uv_cache: Path  # shared by every box's runtime.cachePath (warm syncs)


def _can_drop_to_agent() -> str:
    if os.geteuid() != 0:
        return "end-to-end launcher tests switch to uid 1000 with setpriv, which needs root"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if not Path("/usr/bin/python3").is_file():
        return "/usr/bin/python3 is missing (the SDK venv is built on it)"
    return ""


def _chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid)
    for child in path.rglob("*"):
        os.lchown(child, uid, uid)


@pytest.fixture(scope="session")
def harness() -> Iterator[Harness]:
    reason = _can_drop_to_agent()
    if reason:
        pytest.skip(reason)
    from bandkit.bench.launcher_sdk import build_sdk_home

    root = Path(tempfile.mkdtemp(prefix="launcher-e2e-", dir="/tmp"))
    root.chmod(0o755)
    try:
        sdk = build_sdk_home(root / "sdk", with_band_sdk=True)
        template = root / "template"
        write_project(template)
        subprocess.run(
            [str(sdk.uv), "lock", "--quiet", "--python", "/usr/bin/python3"],
            cwd=template,
            check=True,
            timeout=300,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
        cache = root / "uv-cache"
        cache.mkdir()
        _chown_tree(cache, AGENT_UID)
        yield Harness(
            root=root,
            sdk_root=sdk.root,
            python=sdk.python,
            uv=sdk.uv,
            lock=template / "uv.lock",
            uv_cache=cache,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Launch:
    returncode: int
    stdout: str
    stderr: str
    log: str
    written: str

    def outputs(self) -> str:
        return "\n".join((self.stdout, self.stderr, self.log, self.written))

    def agent_lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith("AGENT ")]


class AgentBox(Box):
    """A box owned by uid 1000 in a world-traversable dir, launched as uid 1000."""

    harness: Harness

    def config(self, **sections: Any) -> dict[str, Any]:
        config = band_config(self.home, **sections)
        if "runtime" not in sections:
            config["runtime"]["cachePath"] = str(self.harness.uv_cache)
        return config

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "WORKSPACE_DIR": str(self.ws),
            "BAND_API_KEY": PROXY_MANAGED,
            "OPENAI_API_KEY": CANARY,  # planted: must never show up in any output
            **self.harness_env(),
            # The machine's CA trust (the image sets the same variables).
            **{k: v for k in PASSTHROUGH if (v := os.environ.get(k))},
        }
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def harness_env(self) -> dict[str, str]:
        return {
            "BAND_SDK_HOME": str(self.harness.sdk_root),
            "BAND_SDK_PYTHON": str(self.harness.python),
            "BAND_SDK_UV": str(self.harness.uv),
        }

    def command(self, *args: str, module: str = "launcher", as_agent: bool = True) -> list[str]:
        argv = [str(self.harness.python), "-m", module, *args]
        if as_agent:
            argv = [
                "setpriv",
                f"--reuid={AGENT_UID}",
                f"--regid={AGENT_UID}",
                "--clear-groups",
                *argv,
            ]
        return argv

    def chown(self) -> None:
        _chown_tree(self.root, AGENT_UID)

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        as_agent: bool = True,
        module: str = "launcher",
    ) -> Launch:
        self.chown()
        result = subprocess.run(
            self.command(*args, module=module, as_agent=as_agent),
            env=env if env is not None else self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        return Launch(
            returncode=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
            log=self.log_text(),
            written=self.all_written_text(),
        )


@pytest.fixture
def agent_box(harness: Harness) -> Iterator[AgentBox]:
    root = Path(tempfile.mkdtemp(prefix="box-", dir=harness.root))
    root.chmod(0o755)
    ws, home = root / "ws", root / "home"
    write_project(ws, lock_source=harness.lock)
    home.mkdir()
    result = AgentBox(root=root, ws=ws, home=home)
    result.harness = harness
    result.write(result.config())
    try:
        yield result
    finally:
        shutil.rmtree(root, ignore_errors=True)
