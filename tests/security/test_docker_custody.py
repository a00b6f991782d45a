"""Docker custody is decided on the host and fails closed, and the container is a sandbox.

Without Docker (a recording stand-in for the CLI): a workspace with no `credentials:`
section, or with a band.yaml that is not even YAML, still gets only the placeholder (the
key reaches neither argv nor the env file), the key goes in only when the operator opts
that sandbox into the env-file tier, and the create argv carries the hardening.

With Docker (`-m docker`): a real sandbox whose workspace has no `credentials:` section
answers a mention through its egress and credential proxies, `docker inspect` shows the
hardening (CapDrop ALL, no-new-privileges, pid and memory limits, its own internal
network), and the agent key (the canary) is in no inspect output, log or manifest.
"""

from __future__ import annotations

import itertools
import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bandkit.manifest import Manifest, teardown
from bandkit.runtimes import egress, hostbox
from bandkit.runtimes.base import SandboxSpec, Secret
from bandkit.runtimes.docker import (
    ENTRYPOINT_CAPS,
    LABEL,
    MEMORY_LIMIT,
    OWNER_LABEL,
    PIDS_LIMIT,
    DockerRuntime,
)
from tests.fakes.iptables import FakeIptables, fake_iptables
from tests.runtimes.helpers import (
    INSECURE,
    Platform,
    echo_workspace,
    emulator,
    scratch_dir,
)

CANARY = "canary-docker-custody-8d2f4b6a1c3e5f70"

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

    def add_container(self, name: str, labels: dict[str, str]) -> None:
        data = self.data()
        data["containers"][name] = {"labels": labels, "running": False}
        self.state.write_text(json.dumps(data))


def fake_docker(directory: Path) -> FakeDocker:
    directory.mkdir(parents=True, exist_ok=True)
    binary, state = directory / "docker", directory / "docker-state.json"
    binary.write_text(FAKE_DOCKER.format(python=sys.executable, state=str(state)))
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
        secrets=(Secret("BAND_API_KEY", ("127.0.0.1",), CANARY),),
    )


WORKSPACES = {
    "no-credentials-section": "schemaVersion: '1'\nagent: {id: a1}\n",
    "yaml-error": "schemaVersion: '1'\ncredentials: [unclosed\n",
    "env-file-tier-in-workspace": (
        "schemaVersion: '1'\ncredentials:\n  source: workspace-env-file\n  path: s.env\n"
    ),
}


@pytest.mark.parametrize("band_yaml", list(WORKSPACES.values()), ids=list(WORKSPACES))
def test_custody_fails_closed_whatever_the_workspace_says(band_yaml: str, tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text(band_yaml)
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary), firewall=fake.iptables.tools)
    try:
        rt.create(spec_for(ws))
    finally:
        stop_box_processes(tmp_path / "run", "box-1")
    [created] = fake.data()["created"]
    assert CANARY not in json.dumps(fake.data()["calls"])
    assert CANARY not in created["env"]
    assert "BAND_API_KEY=proxy-managed\n" in created["env"]
    assert not rt.warnings


def test_the_key_goes_in_only_when_the_operator_opts_that_sandbox_in(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text(WORKSPACES["no-credentials-section"])
    rt = DockerRuntime(
        tmp_path / "run",
        binary=str(fake.binary),
        key_in_container={"box-2"},
        firewall=fake.iptables.tools,
    )
    try:
        rt.create(spec_for(ws, "box-1"))
        rt.create(spec_for(ws, "box-2"))
    finally:
        stop_box_processes(tmp_path / "run", "box-1")
        stop_box_processes(tmp_path / "run", "box-2")
    first, second = fake.data()["created"]
    assert CANARY not in first["env"]
    assert f"BAND_API_KEY={CANARY}\n" in second["env"]
    assert CANARY not in json.dumps(fake.data()["calls"])  # the env file, never argv
    assert any("box-2" in w and "inside the container" in w for w in rt.warnings)


def test_the_create_argv_is_hardened(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text(WORKSPACES["no-credentials-section"])
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary), firewall=fake.iptables.tools)
    try:
        rt.create(spec_for(ws))
    finally:
        stop_box_processes(tmp_path / "run", "box-1")
    data = fake.data()
    argv = data["created"][0]["argv"]
    pairs = list(itertools.pairwise(argv))
    [network] = data["networks"]
    assert data["calls"][1][:5] == ["network", "create", "--driver", "bridge", "--internal"]
    assert ("--network", network) in pairs
    assert "host" not in [b for a, b in pairs if a == "--network"]
    assert ("--cap-drop", "ALL") in pairs
    assert {b for a, b in pairs if a == "--cap-add"} == set(ENTRYPOINT_CAPS)
    assert ("--security-opt", "no-new-privileges") in pairs
    assert ("--pids-limit", str(PIDS_LIMIT)) in pairs
    assert ("--memory", MEMORY_LIMIT) in pairs
    assert ("--label", f"{OWNER_LABEL}={rt.run_id}") in pairs
    assert data["networks"][network][OWNER_LABEL] == rt.run_id
    env = data["created"][0]["env"]
    assert "HTTPS_PROXY=http://127.0.0.1:" in env
    assert "NO_PROXY=localhost,127.0.0.1,::1\n" in env  # the container's own loopback only


# -- a real sandbox
def build_kit_image() -> str:
    from bandkit.dockercli import docker_answers
    from bandkit.image import bases as image_bases
    from bandkit.image import build as image_build
    from bandkit.image.facts import host_arch

    if not docker_answers():
        pytest.fail("no Docker daemon answers: `uv run invoke ci.prepare --lane docker_tests`")
    image_bases.ensure_bases((host_arch(),))
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    request = image_build.BuildRequest(
        tag="band-python-kit:securitytest",
        base="local",
        build_ca=(bundle,) if bundle.is_file() else (),
    )
    return image_build.build(request, progress=lambda _line: None)[0].tag


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
                secrets=(Secret("BAND_API_KEY", ("127.0.0.1",), key),),
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


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with hostile_sandbox(build_kit_image(), "sec-custody-") as box:
        yield box


@pytest.mark.docker
@pytest.mark.slow
def test_the_agent_answers_through_its_egress_and_credential_proxies(sandbox: Sandbox) -> None:
    room = sandbox.platform.room_with(sandbox.agent_id)
    try:
        reply = sandbox.platform.round_trip(room, sandbox.agent_id, timeout=240)
    except AssertionError as exc:
        logs = sandbox.runtime.logs(sandbox.name)
        raise AssertionError(f"{exc}\n--- startup log\n{logs.startup[-3000:]}") from None
    assert reply.startswith("echo: ")
    events = sandbox.runtime.policy_log(sandbox.name)
    platform_hops = [e for e in events if e.get("source") == "platform"]
    assert platform_hops, events
    assert all(e["decision"] == "allowed" for e in platform_hops)


@pytest.mark.docker
@pytest.mark.slow
def test_no_credentials_section_still_keeps_the_key_out_of_inspect_logs_and_manifests(
    sandbox: Sandbox,
) -> None:
    inspect = subprocess.run(
        ["docker", "inspect", sandbox.name], capture_output=True, text=True, check=True
    ).stdout
    env = dict(item.split("=", 1) for item in sandbox.inspect()["Config"]["Env"])
    assert env["BAND_API_KEY"] == "proxy-managed"
    logs = sandbox.runtime.logs(sandbox.name)
    inside = sandbox.runtime.exec(sandbox.name, ["env"]).stdout
    files = [
        p.read_text(errors="replace")
        for p in sandbox.run_dir.rglob("*")
        if p.is_file() and "keychain" not in p.parts
    ]
    assert sandbox.manifest.exists()
    texts = {"inspect": inspect, "startup": logs.startup, "launcher": logs.launcher, "env": inside}
    texts |= {f"file{i}": text for i, text in enumerate(files)}
    assert sandbox.key
    assert [k for k, text in texts.items() if sandbox.key in text] == []


@pytest.mark.docker
@pytest.mark.slow
def test_the_container_hardening_is_visible_in_docker_inspect(sandbox: Sandbox) -> None:
    data = sandbox.inspect()
    host = data["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert {c.removeprefix("CAP_") for c in host["CapAdd"] or []} <= set(ENTRYPOINT_CAPS)
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["PidsLimit"] == PIDS_LIMIT
    assert host["Memory"] == 2 * 1024**3
    assert host["NetworkMode"] not in ("host", "bridge", "default")
    assert data["Config"]["Labels"][LABEL] == sandbox.name
    assert data["Config"]["Labels"][OWNER_LABEL]
    network = json.loads(
        subprocess.run(
            ["docker", "network", "inspect", host["NetworkMode"]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )[0]
    assert network["Internal"] is True
    assert network["Labels"][OWNER_LABEL] == data["Config"]["Labels"][OWNER_LABEL]
    status = sandbox.runtime.exec(sandbox.name, ["cat", "/proc/1/status"]).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split()[0] == "1000"  # the agent (pid 1 after the entrypoint)
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["CapBnd"], 16) == 0
    assert int(fields["CapEff"], 16) == 0
