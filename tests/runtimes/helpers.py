"""Shared helpers for runtime and provision tests: the emulator as a real process, the
human API through httpx, echo-agent workspaces readable by the agent uid."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from ruamel.yaml import YAML

from bandkit.image.facts import STARTER_DIR
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
KIT_SPEC = REPO / "docker" / "band_python_kit" / "spec.yaml"
KIT_SPEC_LEGACY = REPO / "docker" / "band_python_kit" / "sbx-below-0.42.1" / "spec.yaml"
INSECURE = {"BAND_KIT_ALLOW_INSECURE_ENDPOINTS": "1"}


@dataclass
class Platform:
    """The emulator process plus a human-API client."""

    rest_url: str
    ws_url: str
    user_key: str
    process: subprocess.Popen[str]
    log: Path
    ca_pem: str = ""  # the emulator's CA when it serves https/wss

    def client(self) -> httpx.Client:
        verify: Any = True
        if self.ca_pem:
            import ssl

            verify = ssl.create_default_context(cadata=self.ca_pem)
        return httpx.Client(
            base_url=self.rest_url, headers={"X-API-Key": self.user_key}, timeout=10, verify=verify
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        with self.client() as c:
            response = c.request(method, path, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    def register(self, name: str, description: str = "an echo agent for tests") -> tuple[str, str]:
        body = {"agent": {"name": name, "description": description}}
        data = self.call("POST", "/api/v1/me/agents/register", json=body)["data"]
        return data["agent"]["id"], data["credentials"]["api_key"]

    def agents(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/api/v1/me/agents")["data"])

    def delete_agent(self, agent_id: str) -> None:
        self.call("DELETE", f"/api/v1/me/agents/{agent_id}", params={"force": "true"})

    def room_with(self, agent_id: str, title: str = "runtime test") -> str:
        room = self.call("POST", "/api/v1/me/chats", json={"chat": {"title": title}})["data"]
        body = {"participant": {"participant_id": agent_id, "role": "member"}}
        self.call("POST", f"/api/v1/me/chats/{room['id']}/participants", json=body)
        return str(room["id"])

    def mention(self, room: str, agent_id: str, text: str) -> None:
        body = {"message": {"content": text, "mentions": [{"id": agent_id}]}}
        self.call("POST", f"/api/v1/me/chats/{room}/messages", json=body)

    def messages(self, room: str) -> list[dict[str, Any]]:
        return list(self.call("GET", f"/api/v1/me/chats/{room}/messages")["data"])

    def wait_reply(self, room: str, agent_id: str, token: str, timeout: float = 120) -> str:
        def found() -> str:
            for message in self.messages(room):
                if message.get("sender_id") == agent_id and token in message.get("content", ""):
                    return str(message["content"])
            return ""

        return str(wait_for(found, timeout, f"the agent's reply containing {token}", 0.25))

    def round_trip(self, room: str, agent_id: str, timeout: float = 180) -> str:
        token = f"marker-{secrets.token_hex(4)}"
        self.mention(room, agent_id, f"hello {token}")
        return self.wait_reply(room, agent_id, token, timeout)


@contextmanager
def emulator(tmp: Path, user_key: str | None = None, *, tls: bool = False) -> Iterator[Platform]:
    """`python -m bandkit.emulator` on 127.0.0.1 with a user key read from a 0600 file."""
    user_key = user_key or f"user-key-{secrets.token_hex(12)}"
    tmp.mkdir(parents=True, exist_ok=True)
    key_file = tmp / "user.key"
    key_file.write_text(user_key)
    key_file.chmod(0o600)
    log = tmp / "emulator.log"
    argv = [sys.executable, "-m", "bandkit.emulator", "--user-key-file", str(key_file)]
    if tls:
        argv += ["--tls", "--tls-dir", str(tmp / "tls")]
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    try:
        assert process.stdout is not None
        rest = process.stdout.readline().strip()
        ws = process.stdout.readline().strip()
        assert rest.startswith("http"), f"emulator did not start: {log.read_text()}"
        ca_pem = ""
        if tls:
            ca_pem = wait_for(
                lambda: (
                    (tmp / "tls" / "ca.pem").read_text()
                    if (tmp / "tls" / "ca.pem").exists()
                    else ""
                ),
                START_TIMEOUT_S,
                "the emulator's CA file",
            )
        yield Platform(rest, ws, user_key, process, log, ca_pem)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def scratch_dir(prefix: str) -> Path:
    """A world-readable directory under /tmp (the agent uid cannot enter pytest's tmp)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


def echo_workspace(
    parent: Path, *, agent_id: str | None, rest_url: str, ws_url: str, name: str = "ws"
) -> Path:
    """The echo-agent starter with the emulator's endpoints (and agent.id unless None) in
    band.yaml."""
    ws = parent / name
    shutil.copytree(STARTER_DIR, ws, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    yaml = YAML()
    config = yaml.load((ws / "band.yaml").read_text())
    if agent_id is not None:
        config["agent"]["id"] = agent_id
    config["band"]["restUrl"] = rest_url
    config["band"]["wsUrl"] = ws_url
    with (ws / "band.yaml").open("w") as fh:
        yaml.dump(config, fh)
    for path in (ws, *ws.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return ws


@contextmanager
def agent_sdk_env() -> Iterator[None]:
    """As root, build one image-like SDK home for every box in the session."""
    if os.geteuid() != 0 or os.environ.get("BANDKIT_AGENT_SDK"):
        yield
        return
    from bandkit.runtimes.hostbox import ensure_sdk_home

    root = scratch_dir("bandkit-agent-sdk-")
    ensure_sdk_home(root / "sdk")
    os.environ["BANDKIT_AGENT_SDK"] = str(root / "sdk")
    try:
        yield
    finally:
        os.environ.pop("BANDKIT_AGENT_SDK", None)
        shutil.rmtree(root, ignore_errors=True)


def make_kit(parent: Path, env: dict[str, str] | None = None) -> Path:
    """The real kit (spec.yaml in the current shape, sbx-below-0.42.1/spec.yaml in the
    legacy one) plus the emulator opt-in (http/ws endpoints) as kit env, and `env` (e.g.
    the platform's BAND_REST_URL/BAND_WS_URL, as provisioning stages them)."""
    import yaml as pyyaml

    kit = parent / ("kit" if env is None else "kit-env")
    if kit.exists():
        return kit
    for source, target in ((KIT_SPEC, kit), (KIT_SPEC_LEGACY, kit / KIT_SPEC_LEGACY.parent.name)):
        target.mkdir(parents=True)
        spec = pyyaml.safe_load(source.read_text())
        spec["environment"] = {"variables": {**INSECURE, **(env or {})}}
        (target / "spec.yaml").write_text(pyyaml.safe_dump(spec))
    return kit


def refused(task: str, *args: str, env: dict[str, str] | None = None) -> str:
    """`python -m invoke TASK ARGS` from the repository root, expected to refuse: exit 1
    with no traceback; its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "invoke", task, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr
