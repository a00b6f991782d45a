"""The uid-1000 end-to-end harness: an image-like SDK home and agent boxes.

`python -m launcher` runs as uid 1000 through setpriv, from an SDK home built
once per session in a world-readable temp dir (bandkit.runtimes.sdk_home),
because /root and pytest's tmp dirs are 0700.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.constants import PROXY_MANAGED
from tests.launcher.fakes import CANARY, Box, band_config

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


@dataclass(frozen=True)
class Harness:
    """The session's SDK home and shared assets for uid-1000 launches."""

    root: Path
    sdk_root: Path
    python: Path
    uv: Path
    lock: Path  # uv.lock of the trivial project
    uv_cache: Path  # shared by every box's runtime.cachePath (warm syncs)


def can_drop_to_agent() -> str:
    if os.geteuid() != 0:
        return "end-to-end launcher tests switch to uid 1000 with setpriv, which needs root"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if not Path("/usr/bin/python3").is_file():
        return "/usr/bin/python3 is missing (the SDK venv is built on it)"
    return ""


def chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid)
    for child in path.rglob("*"):
        os.lchown(child, uid, uid)


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
        chown_tree(self.root, AGENT_UID)

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


def agent_report(launch: Launch) -> dict[str, object]:
    lines = launch.agent_lines()
    assert lines, f"the agent never ran:\n{launch.stderr}"
    report: dict[str, object] = json.loads(lines[0].removeprefix("AGENT "))
    return report


def assert_clean(launch: Launch) -> None:
    assert "Traceback" not in launch.stderr
    assert CANARY not in launch.outputs()


def assert_fails(launch: Launch, phase: str, *fragments: str) -> None:
    assert launch.returncode == 1, launch.stderr
    assert f"[{phase}]" in launch.stderr, launch.stderr
    for fragment in fragments:
        assert fragment in launch.stderr, launch.stderr
    assert not launch.agent_lines()
    assert_clean(launch)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def use_env_file(agent_box: AgentBox, content: str, *, mode: int = 0o600) -> Path:
    secrets = agent_box.ws / ".band" / "secrets.env"
    secrets.parent.mkdir()
    secrets.write_text(content)
    secrets.chmod(mode)
    (agent_box.ws / ".gitignore").write_text(".band/\n")
    agent_box.write(
        agent_box.config(
            credentials={
                "source": "workspace-env-file",
                "path": ".band/secrets.env",
                "acknowledgePlaintextInSandbox": True,
            }
        )
    )
    return secrets
