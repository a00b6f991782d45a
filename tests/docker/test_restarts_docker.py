"""Restarts are routine (issue 26) on the docker runtime: a reboot, simulated, then
`kit.resume --all`, as a user runs the commands.

`platform.up`, `kit.provision --runtime docker` (the kit image as `band-python-kit:local`),
then what a reboot takes from the host: every host process the kit started dies by
SIGKILL (the platform; the box's egress and credential proxies, found by their
`BANDKIT_TAG`), the Docker daemon restarts (the container has no restart policy, so it
stays stopped, as after a boot), and the kit's iptables chains are gone (flushed and
deleted, with their INPUT jumps) and so is the sandbox network's bridge, as a fresh kernel
has neither (the daemon makes the bridge again when it starts). `kit.status` then shows
every part down (exit 1); `kit.resume --all` brings them back in order and the agent
answers `kit.ping`; `kit.status` is all up (exit 0). The firewall that came back does its
job: from the container a service on a host address is out of reach, the egress proxy
is not. `kit.unprovision` then leaves nothing: no container, network, chain or process.

It restarts this host's Docker daemon (marked `exclusive`: the docker lane runs it alone,
after the rest); it waits for other running containers to end first and refuses if they
do not, as the smoke's daemon drill does.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.ci import dockerd
from bandkit.emulator import service
from bandkit.proxies import egress
from bandkit.runtimes import boxnet, hostguard
from launcher.constants import PLACEHOLDER_AGENT_ID as PLACEHOLDER
from tests.kit.support import Home, agent_id_in, kill, kill_platform
from tests.runtimes.helpers import scratch_dir
from tests.support import images
from tests.support.wait import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.exclusive]
OTHERS_WAIT_S = 120.0  # other containers get this long to end before the daemon restarts
PYTHON = "/opt/band/venv/bin/python"  # the kit image's interpreter


def _docker(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *argv], capture_output=True, text=True, check=check, timeout=120
    )


def box_of(home: Home, name: str) -> Path:
    """The docker runtime's host-side box of sandbox `name` (`kit.*` uses run_dir/runtimes)."""
    return home.run_dir / "runtimes" / "docker" / "docker" / name


def host_pids(home: Home) -> dict[int, str]:
    """Every live host process tagged with this run directory: pid -> its tag."""
    found: dict[int, str] = {}
    prefix = f"{processes.TAG_ENV}=".encode()
    where = str(home.run_dir).encode()

    def ours(proc: processes.Proc) -> bool:
        tags = [e[len(prefix) :] for e in proc.environ if e.startswith(prefix) and where in e]
        if tags:
            found[proc.pid] = tags[0].decode(errors="replace")
        return bool(tags)

    pids = processes.scan(ours)
    return {pid: found[pid] for pid in pids}


def _running_others(name: str) -> list[str]:
    out = _docker("ps", "--format", "{{.Names}}").stdout.split()
    return [other for other in out if other != name]


def restart_dockerd(name: str, bridge: str) -> None:
    """Stop the Docker daemon and start it again the way it was started, once no other
    container runs on it (restarting it would stop them). While it is down the sandbox
    network's bridge goes too, as a fresh kernel has none: the daemon makes it again."""
    deadline = time.monotonic() + OTHERS_WAIT_S
    while (others := _running_others(name)) and time.monotonic() < deadline:
        time.sleep(1.0)  # a container that is about to end: give it a moment
    assert not others, f"other containers run on this Docker daemon ({others}): stop them first"
    with dockerd.stopped(dockerd.find()):  # the container stops with it
        subprocess.run(["ip", "link", "delete", bridge], check=False, timeout=20)
    assert Path("/sys/class/net", bridge).exists(), f"dockerd did not make {bridge} again"


def flush_chains(guard: hostguard.Guard, tools: hostguard.Tools) -> None:
    """What a boot leaves of the guard in both families: no INPUT jump, no chain."""
    for binary in (tools.iptables, tools.ip6tables):
        table = _table(binary)
        for tokens in table:
            if tokens[:2] == ["-A", "INPUT"] and tokens[-2:] == ["-j", guard.chain]:
                subprocess.run([binary, "-w", "5", "-D", *tokens[1:]], check=True, timeout=20)
        if ["-N", guard.chain] in table:
            subprocess.run([binary, "-w", "5", "-F", guard.chain], check=True, timeout=20)
            subprocess.run([binary, "-w", "5", "-X", guard.chain], check=True, timeout=20)


def _table(binary: str) -> list[list[str]]:
    out = subprocess.run(
        [binary, "-w", "5", "-S"], capture_output=True, text=True, check=True, timeout=20
    ).stdout
    return [shlex.split(line) for line in out.splitlines() if line.strip()]


def chain_anywhere(chain: str, tools: hostguard.Tools) -> list[str]:
    """Every line of either filter table that names `chain`."""
    return [
        shlex.join(tokens)
        for binary in (tools.iptables, tools.ip6tables)
        for tokens in _table(binary)
        if chain in tokens
    ]


def reaches(name: str, gateway: str, *ports: int) -> list[bool]:
    """From inside the container (as its agent uid): whether a TCP connect to the gateway
    (the host) on each port succeeds within 3 s."""
    code = (
        "import socket, sys\n"
        "for port in sys.argv[2:]:\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        "    try:\n"
        "        s.connect((sys.argv[1], int(port))); print('open')\n"
        "    except OSError:\n"
        "        print('closed')\n"
        "    finally:\n"
        "        s.close()\n"
    )
    argv = ["exec", "--user", "1000", name, PYTHON, "-c", code, gateway, *map(str, ports)]
    done = _docker(*argv, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line == "open" for line in done.stdout.split()]


@pytest.fixture
def home(kit_image: str, daemon_back: None) -> Iterator[Home]:
    images.ensure_local_tag(kit_image)  # what kit.provision --runtime docker runs
    root = scratch_dir("kit-restarts-docker-")
    result = Home(root, root / ".run")
    try:
        yield result
    finally:  # whatever a failed test left: its sandboxes, its processes, its platform
        provisioned = result.run_dir / "provision"
        for folder in sorted(provisioned.iterdir()) if provisioned.is_dir() else []:
            result.invoke("kit.unprovision", "--name", folder.name, "--forget-unreachable")
        for pid in host_pids(result):
            kill(pid)
        if (result.run_dir / service.RUN_FILE).exists():
            service.down(result.run_dir)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(600)
def test_a_simulated_reboot_on_docker_then_kit_resume_all(home: Home) -> None:
    name = f"reboot-{uuid.uuid4().hex[:8]}"
    home.ok("platform.up")
    home.provision(name, runtime="docker")
    assert "DOWN" not in home.ok("kit.status").stdout
    box = box_of(home, name)
    guard = hostguard.read_record(box)
    assert guard is not None, "the docker sandbox has no host firewall recorded"
    tools = hostguard.Tools.find()
    assert hostguard.installed(guard, tools)
    network = _docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", name).stdout
    assert "bandkit-" in network
    before = host_pids(home)
    assert sorted(before.values()) == sorted([boxnet.proxy_tag(box), egress.egress_tag(box)])

    # The reboot: every host process the kit started dies (no clean stop anywhere), the
    # Docker daemon restarts (the container stops with it: no restart policy), and the
    # kernel's tables hold none of the kit's chains.
    for pid in before:
        kill(pid)
    kill_platform(home)
    wait_for(lambda: host_pids(home) == {}, 10, "the proxies to die")
    restart_dockerd(name, guard.bridge)
    flush_chains(guard, tools)
    state = _docker("inspect", "--format", "{{.State.Status}}", name).stdout.strip()
    assert state == "exited", state

    status = home.invoke("kit.status")
    assert status.returncode == 1, status.stdout + status.stderr
    parts = ("platform", "container", "host firewall", "egress proxy", "credential proxy")
    for part in (*parts, "connected"):
        rows = [line for line in status.stdout.splitlines() if line.startswith(f"  {part} ")]
        assert len(rows) == 1, status.stdout
        assert " DOWN " in rows[0], status.stdout
    assert "kit.resume --all" in status.stdout

    resumed = home.ok("kit.resume", "--all")
    print(status.stdout, resumed.stdout, sep="\n")  # shown with -s, or when the test fails
    assert "the local platform started again from its state" in resumed.stdout
    brought = f"kit.resume: {name}: brought back (docker): {', '.join(parts[1:])}"
    assert brought in resumed.stdout, resumed.stdout
    assert "kit.resume: 1 agents connected" in resumed.stdout

    status = home.ok("kit.status")  # all green: exit 0, no part down
    assert "DOWN" not in status.stdout
    assert "all 1 agents up" in status.stdout
    pinged = home.ok("kit.ping", "--name", name)
    assert pinged.stdout.startswith(f"echo: @{name} ping:"), pinged.stdout
    assert hostguard.installed(guard, tools)

    # The firewall that came back guards: a service on a host address (the gateway) is
    # out of the container's reach, its egress proxy is not.
    with socket.create_server((guard.gateway, 0)) as service_on_host:
        port = service_on_host.getsockname()[1]
        assert reaches(name, guard.gateway, guard.port, port) == [True, False]

    again = home.ok("kit.resume", "--all")  # idempotent: nothing was down
    assert "every part of its docker sandbox was up" in again.stdout

    done = home.ok("kit.unprovision", "--name", name)
    assert "FAILED" not in done.stdout, done.stdout
    assert name not in home.agents()
    assert agent_id_in(home.root / name) == PLACEHOLDER
    assert not (home.run_dir / "provision" / name).exists()
    assert _docker("ps", "--all", "--filter", f"name=^{name}$", "--format", "{{.ID}}").stdout == ""
    networks = _docker("network", "ls", "--filter", f"label=bandkit.sandbox={name}", "-q").stdout
    assert networks == ""
    assert chain_anywhere(guard.chain, tools) == []
    assert hostguard.leftovers(guard.run_id, tools) == []
    assert host_pids(home) == {}
    home.ok("platform.down")
