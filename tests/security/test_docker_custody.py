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

import dataclasses
import itertools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker import LABEL, OWNER_LABEL, DockerRuntime
from bandkit.runtimes.docker.identity import GID_ENV, GID_RANGE, draw_gid, host_has_gid
from bandkit.runtimes.docker.runtime import ENTRYPOINT_CAPS, MEMORY_LIMIT, PIDS_LIMIT
from tests.security.support import (
    CANARY,
    WORKSPACES,
    Sandbox,
    fake_docker,
    hostile_sandbox,
    spec_for,
    stop_box_processes,
)
from tests.support.wait import wait_for


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
    [net_create] = [call for call in data["calls"] if call[:2] == ["network", "create"]]
    assert net_create[:5] == ["network", "create", "--driver", "bridge", "--internal"]
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


def test_the_image_is_checked_through_the_runtimes_own_docker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon the runtime targets answers for the image, not whatever `docker` is first
    on PATH (here one that has no image at all)."""
    fake = fake_docker(tmp_path / "bin")
    other = tmp_path / "path" / "docker"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho 'Error: No such image' >&2\nexit 1\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{other.parent}:/usr/bin:/bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text(WORKSPACES["no-credentials-section"])
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary), firewall=fake.iptables.tools)
    try:
        rt.create(spec_for(ws))
    finally:
        stop_box_processes(tmp_path / "run", "box-1")
    image_check = ["image", "inspect", "--format", "{{json .Config.Labels}}"]
    assert [*image_check, "band-python-kit:local"] in fake.data()["calls"]
    missing = dataclasses.replace(spec_for(ws, "box-2"), image="band-python-kit:missing")
    with pytest.raises(SandboxError, match=r"image band-python-kit:missing is missing; run `uv"):
        rt.create(missing)
    assert "box-2" not in fake.data()["containers"]


# -- the agent's gid: one of the box's own, which no host account has
def test_each_box_gets_a_gid_no_host_account_has_and_exec_uses_it(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text(WORKSPACES["no-credentials-section"])
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary), firewall=fake.iptables.tools)
    try:
        rt.create(spec_for(ws, "box-1"))
        rt.create(spec_for(ws, "box-2"))
    finally:
        stop_box_processes(tmp_path / "run", "box-1")
        stop_box_processes(tmp_path / "run", "box-2")
    gids = []
    for created in fake.data()["created"]:
        env = dict(line.split("=", 1) for line in created["env"].splitlines())
        gids.append(int(env[GID_ENV]))
    low, high = GID_RANGE
    assert all(low <= gid < high and not host_has_gid(gid) for gid in gids)
    assert gids[0] != gids[1]
    for name, gid in zip(("box-1", "box-2"), gids, strict=True):
        owner = json.loads((tmp_path / "run" / "docker" / name / "owner.json").read_text())
        assert owner["gid"] == gid  # recorded before the container exists
        rt.exec(name, ["true"])
        assert fake.data()["calls"][-1][:3] == ["exec", "--user", f"1000:{gid}"]


def test_an_image_whose_entrypoint_ignores_the_gid_is_refused_before_anything_is_made(
    tmp_path: Path,
) -> None:
    fake = fake_docker(tmp_path / "bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    stale = dataclasses.replace(spec_for(ws), image="band-python-kit:stale")
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary), firewall=fake.iptables.tools)
    with pytest.raises(SandboxError, match=r"predates per-box agent gids.*rebuild it"):
        rt.create(stale)
    assert fake.data()["networks"] == {}
    assert fake.data()["created"] == []


def test_a_remapping_daemon_keeps_the_images_gid(tmp_path: Path) -> None:
    """With userns-remap (or rootless Docker) container ids are not the host's, and a
    remapped range has no room for a high gid: the agent keeps gid 1000."""
    fake = fake_docker(tmp_path / "bin")
    fake.set_security_options(["name=seccomp,profile=default", "name=userns"])
    ws = tmp_path / "ws"
    ws.mkdir()
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary), firewall=fake.iptables.tools)
    try:
        rt.create(spec_for(ws))
    finally:
        stop_box_processes(tmp_path / "run", "box-1")
    [created] = fake.data()["created"]
    assert f"{GID_ENV}=1000\n" in created["env"]
    rt.exec("box-1", ["true"])
    assert fake.data()["calls"][-1][:3] == ["exec", "--user", "1000"]


def test_a_gid_some_host_account_has_or_could_map_is_never_drawn(tmp_path: Path) -> None:
    assert host_has_gid(0)  # root's group
    subgid = tmp_path / "subgid"
    subgid.write_text("someone:300000000:65536\n")
    assert host_has_gid(300000100, subgid)
    assert not host_has_gid(300065536, subgid)
    taken = {GID_RANGE[0] + n for n in range(10)}
    seen = {draw_gid(lambda gid: gid in taken or gid % 2 == 0) for _ in range(50)}
    assert all(gid % 2 for gid in seen)
    assert not seen & taken
    with pytest.raises(SandboxError, match="found no gid"):
        draw_gid(lambda gid: True)


# -- a real sandbox
@pytest.fixture(scope="module")
def sandbox(kit_image: str) -> Iterator[Sandbox]:
    with hostile_sandbox(kit_image, "sec-custody-") as box:
        yield box


@pytest.mark.docker
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


# What a host process of uid 1000 tries on every process of the container: its
# environment, the container's pid 1 through its root, and its memory. The token comes
# on stdin (never argv); one JSON report on stdout.
PROBE = r"""
import json, os, sys
token = sys.stdin.read().strip().encode()
report = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "pids": {}}

def memory(pid):
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if "r" not in perms or end - start > 64 << 20:
                continue
            try:
                mem.seek(start)
                if token in mem.read(end - start):
                    return token
            except (OSError, OverflowError, ValueError):
                continue
    return b""

for pid in sys.argv[1:]:
    seen = report["pids"][pid] = {}
    for name, read in (
        ("environ", lambda: open(f"/proc/{pid}/environ", "rb").read()),
        ("root", lambda: open(f"/proc/{pid}/root/proc/1/environ", "rb").read()),
        ("memory", lambda: memory(pid)),
    ):
        try:
            seen[name] = "TOKEN" if token in read() else "read"
        except OSError as exc:
            seen[name] = exc.strerror or type(exc).__name__
print(json.dumps(report))
"""


def container_pids(name: str) -> list[str]:
    out = subprocess.run(
        ["docker", "top", name, "-eo", "pid"], capture_output=True, text=True, check=True
    ).stdout
    return [line.strip() for line in out.splitlines()[1:] if line.strip().isdigit()]


def host_ids(pid: str) -> tuple[str, str]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return fields["Uid"].split()[0], fields["Gid"].split()[0]


@pytest.mark.docker
def test_a_host_process_of_uid_1000_cannot_take_the_agents_proxy_token(sandbox: Sandbox) -> None:
    """Without a user namespace the agent is host uid 1000 too. A host process of that uid
    reads nothing of the agent's or an exec'd process's (environment, memory, root), so
    it never sees the credential proxy's per-box token in BAND_REST_URL."""
    python = next(p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if Path(p).exists())
    env = dict(item.split("=", 1) for item in sandbox.inspect()["Config"]["Env"])
    token = urlsplit(env["BAND_REST_URL"]).path.split("/")[1]
    assert len(token) >= 32, "the platform route carries the proxy token"
    sandbox.runtime.exec(sandbox.name, ["sleep", "600"], detach=True)
    wait_for(
        lambda: len(container_pids(sandbox.name)) >= 2,
        60,
        "the agent and an exec'd process in the container",
    )
    first = str(sandbox.inspect()["State"]["Pid"])  # the entrypoint, then the launcher
    wait_for(lambda: host_ids(first)[0] == "1000", 60, "the entrypoint dropping to uid 1000")
    ids = {pid: host_ids(pid) for pid in container_pids(sandbox.name)}
    assert {uid for uid, _ in ids.values()} == {"1000"}  # the very uid the probe runs as
    as_uid_1000 = ["setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups"]
    probe = subprocess.run(
        [*as_uid_1000, python, "-I", "-c", PROBE, *ids],
        input=token,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    report = json.loads(probe.stdout)
    assert (report["uid"], report["gid"], report["groups"]) == (1000, 1000, [])
    leaks = {pid: seen for pid, seen in report["pids"].items() if "TOKEN" in seen.values()}
    assert leaks == {}, f"a host process of uid 1000 read the token: {leaks}"
    assert all(seen["environ"] == "Permission denied" for seen in report["pids"].values())
    assert all(gid != "1000" for _, gid in ids.values()), ids  # the box's own gid
