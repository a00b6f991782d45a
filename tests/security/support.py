"""The docker-sandbox helpers the security tests share: a recording stand-in for the docker
CLI (no daemon needed), the sandbox spec and workspaces the custody tests create, and a
real hostile sandbox (an echo agent whose workspace has no `credentials:` section), and a
sandbox's egress proxy served in the test's own event loop with raw clients for it.

The kit image a real sandbox runs is the session fixture `kit_image` (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bandkit.manifest import Manifest, teardown
from bandkit.proxies import egress
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import SandboxSpec, Secret
from bandkit.runtimes.docker import DockerRuntime
from bandkit.runtimes.docker.identity import GID_LABEL
from tests.fakes.iptables import FakeIptables, fake_iptables
from tests.runtimes.helpers import INSECURE, Platform, echo_workspace, emulator, scratch_dir

CANARY = "canary-docker-custody-8d2f4b6a1c3e5f70"  # the agent key spec_for plants

# -- a recording stand-in for the docker CLI (no daemon needed)
FAKE_DOCKER = r"""#!{python}
import json, os, sys
state_path = {state!r}
state = json.load(open(state_path)) if os.path.exists(state_path) else {{
    "containers": {{}}, "networks": {{}}, "calls": [], "created": []}}
args = sys.argv[1:]
state["calls"].append(args)

def save():
    json.dump(state, open(state_path, "w"))

def labels(argv):
    out = {{}}
    for i, a in enumerate(argv):
        if a == "--label":
            k, _, v = argv[i + 1].partition("=")
            out[k] = v
    return out

def fail(msg):
    save(); sys.stderr.write(msg + "\n"); sys.exit(1)

if args[0] == "inspect":
    name, fmt = args[-1], args[args.index("--format") + 1]
    box = state["containers"].get(name)
    if box is None:
        fail(f"Error: No such container: {{name}}")
    print("true" if box["running"] else "false") if "Running" in fmt else print(
        json.dumps(box["labels"]))
elif args[:2] == ["network", "create"]:
    state["networks"][args[-1]] = labels(args)
elif args[:2] == ["network", "inspect"]:
    name, fmt = args[-1], args[args.index("--format") + 1]
    if name not in state["networks"]:
        fail(f"Error: network {{name}} not found")
    print(json.dumps([{{"Subnet": "127.0.0.0/8", "Gateway": "127.0.0.1"}}]) if "IPAM" in fmt
          else '"%s" {{}}' % ("0f" * 32) if ".Id" in fmt
          else json.dumps(state["networks"][name]))
elif args[:2] == ["network", "rm"]:
    state["networks"].pop(args[-1], None)
elif args[0] == "create":
    name = args[args.index("--name") + 1]
    env_file = args[args.index("--env-file") + 1]
    state["created"].append({{"argv": args, "env": open(env_file).read()}})
    state["containers"][name] = {{"labels": labels(args), "running": False}}
elif args[:2] == ["image", "inspect"]:
    if "missing" in args[-1]:
        fail(f"Error: No such image: {{args[-1]}}")
    if "--format" in args and "Labels" in args[args.index("--format") + 1]:
        # an image built before per-box gids ("stale") lacks the entrypoint's label
        print(json.dumps({{}} if "stale" in args[-1] else {{{gid_label!r}: "1"}}))
    else:
        print("sha256:" + "ab" * 32)
elif args[0] == "info":
    print(json.dumps(state.get("security_options", ["name=seccomp,profile=default"])))
elif args[0] == "start":
    state["containers"][args[-1]]["running"] = True
elif args[0] == "stop":
    state["containers"][args[-1]]["running"] = False
elif args[:2] == ["rm", "--force"]:
    state["containers"].pop(args[-1], None)
elif args[0] == "ps":
    print("\n".join(state["containers"]))
save()
"""


@dataclass
class FakeDocker:
    binary: Path
    state: Path
    iptables: FakeIptables  # the host firewall's stand-in (DockerRuntime(firewall=...))

    def data(self) -> dict[str, Any]:
        if not self.state.exists():
            return {"containers": {}, "networks": {}, "calls": [], "created": []}
        loaded: dict[str, Any] = json.loads(self.state.read_text())
        return loaded

    def set_security_options(self, options: list[str]) -> None:
        """What `docker info` reports (e.g. `name=userns` for a remapping daemon)."""
        data = self.data()
        data["security_options"] = options
        self.state.write_text(json.dumps(data))

    def add_container(self, name: str, labels: dict[str, str]) -> None:
        data = self.data()
        data["containers"][name] = {"labels": labels, "running": False}
        self.state.write_text(json.dumps(data))


def fake_docker(directory: Path) -> FakeDocker:
    directory.mkdir(parents=True, exist_ok=True)
    binary, state = directory / "docker", directory / "docker-state.json"
    binary.write_text(
        FAKE_DOCKER.format(python=sys.executable, state=str(state), gid_label=GID_LABEL)
    )
    binary.chmod(0o755)
    return FakeDocker(binary, state, fake_iptables(directory / "iptables"))


def stop_box_processes(run: Path, name: str) -> None:
    box = run / "docker" / name
    hostbox.stop(box)
    egress.stop(box)


def spec_for(ws: Path, name: str = "box-1") -> SandboxSpec:
    return SandboxSpec(
        name=name,
        workspaces=(ws,),
        env={
            **INSECURE,
            "BAND_REST_URL": "http://127.0.0.1:9",
            "BAND_WS_URL": "ws://127.0.0.1:9/api/v1/socket/websocket",
        },
        secrets=(
            Secret(
                "BAND_API_KEY",
                ("127.0.0.1",),
                CANARY,
                scopes=boxnet.band_key_scopes("http://127.0.0.1:9"),
            ),
        ),
    )


WORKSPACES = {
    "no-credentials-section": "schemaVersion: '1'\nagent: {id: a1}\n",
    "yaml-error": "schemaVersion: '1'\ncredentials: [unclosed\n",
    "env-file-tier-in-workspace": (
        "schemaVersion: '1'\ncredentials:\n  source: workspace-env-file\n  path: s.env\n"
    ),
}


# -- a real sandbox
@dataclass
class Sandbox:
    """A docker sandbox laid out as kit.provision lays it out (so kit.* tasks find it)."""

    name: str
    run_dir: Path
    manifest: Path
    runtime: DockerRuntime  # without a manifest: for reading
    platform: Platform
    agent_id: str
    key: str
    scratch: Path

    def inspect(self) -> dict[str, Any]:
        out = subprocess.run(
            ["docker", "inspect", "--type", "container", self.name],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        data: dict[str, Any] = json.loads(out)[0]
        return data


def drop_credentials_section(ws: Path) -> None:
    from ruamel.yaml import YAML

    yaml = YAML()
    config = yaml.load((ws / "band.yaml").read_text())
    del config["credentials"]
    with (ws / "band.yaml").open("w") as fh:
        yaml.dump(config, fh)


@contextmanager
def hostile_sandbox(image: str, prefix: str) -> Iterator[Sandbox]:
    """A running echo agent in a docker sandbox whose workspace has no `credentials:`
    section; torn down from its manifest afterwards (the teardown must be clean)."""
    scratch = scratch_dir(prefix)
    name = f"sec-{secrets.token_hex(3)}"
    run = scratch / "run"
    manifest = run / "provision" / name / "manifest.json"
    with emulator(scratch / "emulator") as platform:
        agent_id, key = platform.register(name)
        try:
            ws = echo_workspace(
                scratch, agent_id=agent_id, rest_url=platform.rest_url, ws_url=platform.ws_url
            )
            drop_credentials_section(ws)
            spec = SandboxSpec(
                name=name,
                workspaces=(ws,),
                image=image,
                env={
                    **INSECURE,
                    "BAND_REST_URL": platform.rest_url,
                    "BAND_WS_URL": platform.ws_url,
                },
                secrets=(
                    Secret(
                        "BAND_API_KEY",
                        ("127.0.0.1",),
                        key,
                        scopes=boxnet.band_key_scopes(platform.rest_url, platform.ws_url),
                    ),
                ),
            )
            with Manifest.open(manifest, secrets=[key]) as m:
                DockerRuntime(run / "runtimes" / "docker", manifest=m).create(spec)
            yield Sandbox(
                name,
                run,
                manifest,
                DockerRuntime(run / "runtimes" / "docker"),
                platform,
                agent_id,
                key,
                scratch,
            )
            with Manifest.open(manifest, secrets=[key]) as m:
                report = teardown(
                    m, DockerRuntime(run / "runtimes" / "docker", manifest=m).removers()
                )
            assert report.clean, report.lines()
        finally:
            if manifest.exists():
                with Manifest.open(manifest) as m:
                    teardown(m, DockerRuntime(run / "runtimes" / "docker", manifest=m).removers())
            platform.delete_agent(agent_id)
            shutil.rmtree(scratch, ignore_errors=True)


# -- a sandbox's egress proxy, served in-process (no Docker)
EGRESS_WAIT_S = 10.0


@dataclass
class Running:
    box: Path
    port: int

    def events(self) -> list[dict[str, object]]:
        return egress.read_log(self.box)


@contextlib.asynccontextmanager
async def egress_proxy(
    box: Path, rules: Sequence[str | tuple[str, str]], *, clients: str = "127.0.0.0/8"
) -> AsyncIterator[Running]:
    """A sandbox's egress proxy served in this event loop (a runtime runs the same code as
    a process); a rule is its text (source `sandbox`) or (text, source)."""
    config = egress.Config(
        sandbox="box-1",
        listen="127.0.0.1",
        port=0,
        clients=clients,
        rules=[
            {"rule": r, "source": "sandbox"}
            if isinstance(r, str)
            else {"rule": r[0], "source": r[1]}
            for r in rules
        ],
        grants=str(box / egress.GRANTS_NAME),
        log=str(box / egress.LOG_NAME),
        ports_file=str(box / egress.PORTS_NAME),
    )
    ready = asyncio.Event()
    task = asyncio.ensure_future(egress.serve(config, ready=ready))
    await asyncio.wait_for(ready.wait(), EGRESS_WAIT_S)
    port = json.loads((box / egress.PORTS_NAME).read_text())["port"]
    try:
        yield Running(box, port)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def exchange(port: int, data: bytes) -> bytes:
    """Send `data` on a fresh connection; everything received until the proxy closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), EGRESS_WAIT_S)
    except ConnectionResetError:
        return b""  # closed with our bytes unread: nothing was answered
    finally:
        writer.close()


async def tunnel(port: int, target: str, inner: bytes) -> tuple[bytes, bytes]:
    """CONNECT to `target`, then send `inner` through; (proxy answer, what came back)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), EGRESS_WAIT_S)
        if b" 200 " not in answer.split(b"\r\n", 1)[0] + b" ":
            return answer + await asyncio.wait_for(reader.read(), EGRESS_WAIT_S), b""
        writer.write(inner)
        await writer.drain()
        return answer, await asyncio.wait_for(reader.read(), EGRESS_WAIT_S)
    finally:
        writer.close()


def status(response: bytes) -> int:
    parts = response.split(b"\r\n", 1)[0].split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def get(target: str, *extra: str) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: somewhere.else", *extra, "", ""]
    return "\r\n".join(lines).encode()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
