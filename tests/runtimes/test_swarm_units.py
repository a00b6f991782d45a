"""The swarm runtime's parts that need no cluster: its credential proxy as a zipapp, the
refusal to run without a swarm, and the labelled removal of only what is ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bandkit.proxies.keyproxy import zipapp
from bandkit.runtimes.base import Limits, SandboxError, SandboxSpec, SandboxStatus, Secret
from bandkit.runtimes.boxnet import band_key_scopes
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.select import get_runtime
from bandkit.runtimes.swarm import SwarmRuntime, objects
from bandkit.runtimes.swarm import runtime as swarm_runtime
from tests.runtimes.helpers import refused
from tests.support.wait import wait_for


def test_the_proxy_zipapp_is_reproducible_and_runs_on_its_own(tmp_path: Path) -> None:
    """Isolated (`-I`: no site-packages, no user site, no PYTHONPATH), so it runs only if
    everything keyproxy imports is inside; it serves its route and answers a request
    without the token with 403 before it opens an upstream connection."""
    data = zipapp.build()
    assert data == zipapp.build()
    app = tmp_path / "keyproxy.pyz"
    app.write_bytes(data)
    box = tmp_path / "box"
    box.mkdir()
    config = {
        "token": "t" * 32,
        "routes": [
            {"upstream": "http://127.0.0.1:9", "paths": ["/api"], "swaps": [["p", "k", ["/api"]]]}
        ],
    }
    proc = subprocess.Popen(
        [sys.executable, "-I", "-P", str(app), str(box / "ports.json"), "127.0.0.1"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(config))
        proc.stdin.close()
        wait_for(
            lambda: (box / "ports.json").exists() or proc.poll() is not None,
            timeout=20,
            what="the zipapp's ports file",
        )
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        (port,) = json.loads((box / "ports.json").read_text())["ports"]
        answer = httpx.get(f"http://127.0.0.1:{port}/api/x", timeout=10)
        assert answer.status_code == 403
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_without_a_swarm_it_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no local cluster, whether or not this machine runs one now
    monkeypatch.setattr(swarm_runtime, "OWNER_FILE", tmp_path / "no-cluster" / "owner")
    runtime = get_runtime("swarm", run_dir=tmp_path / "runtimes")
    spec = SandboxSpec(name="my-agent", workspaces=(tmp_path,))
    for attempt in (lambda: runtime.create(spec), runtime.list, lambda: runtime.status("x")):
        with pytest.raises(SandboxError, match=r"cluster\.up --nodes 3"):
            attempt()


def test_an_object_without_our_owner_label_is_kept(tmp_path: Path) -> None:
    """A same-named service, network, secret or config another run (or a person) made is
    reported and kept, never removed."""
    calls = tmp_path / "calls"
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case "$2" in inspect) echo \'{"bandkit.owner":"someone-else"}\';; esac\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    engine = Engine(str(fake), "unix:///nowhere.sock")
    for kind in objects.KINDS:
        with pytest.raises(SandboxError, match="not ours"):
            objects.remove(engine, kind, "my-agent", "our-run")
    assert " rm " not in calls.read_text()


def _fake_docker(tmp_path: Path) -> tuple[Path, Path]:
    """A docker that logs its DOCKER_HOST and argv and answers inspect with our label."""
    calls = tmp_path / "calls"
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$DOCKER_HOST $*" >> {calls}\n'
        'case "$2" in inspect) echo \'{"bandkit.owner":"run1"}\';; esac\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    return fake, calls


def test_teardown_reaches_the_swarm_the_sandbox_was_made_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandbox made on a named swarm records it: its removal goes there whatever the
    environment says then; one made on the local cluster, gone since with the cluster, is
    gone (success), never an error that keeps the manifest from emptying."""
    from bandkit.manifest import Kind, Manifest, teardown
    from bandkit.runtimes.swarm import SwarmRuntime
    from bandkit.runtimes.swarm import runtime as swarm_runtime

    monkeypatch.setattr(swarm_runtime, "OWNER_FILE", tmp_path / "no-local-cluster")
    fake, calls = _fake_docker(tmp_path)
    path = tmp_path / "manifest.json"
    with Manifest.open(path) as manifest:
        remote = SwarmRuntime(
            tmp_path / "a", manifest=manifest, host="tcp://mgr:2376", binary=str(fake)
        )
        remote.record(Kind.SANDBOX, "x", part="service", name="x", object="x", owner="run1")
        local = SwarmRuntime(tmp_path / "b", manifest=manifest, binary=str(fake))
        local.record(Kind.SANDBOX, "y", part="service", name="y", object="y", owner="run1")
        assert "swarm_host" not in manifest.resources[-1].details
        later = SwarmRuntime(tmp_path / "a", manifest=manifest, binary=str(fake))
        assert teardown(manifest, later.removers()).clean
    assert not path.exists()
    lines = calls.read_text().splitlines()
    assert lines == [
        "tcp://mgr:2376 service inspect --format {{json .Spec.Labels}} x",
        "tcp://mgr:2376 service rm x",
    ]


def test_swarm_host_is_a_docker_host_for_the_swarm_runtime_only(tmp_path: Path) -> None:
    for args, said in (
        (["--runtime", "docker", "--swarm-host", "tcp://m:2376"], "for the swarm runtime"),
        (["--runtime", "swarm", "--swarm-host", "m:2376"], "give a DOCKER_HOST value"),
    ):
        stderr = refused(
            "kit.provision",
            *("--name", "a", "--description", "an agent here", "--workspace", str(tmp_path)),
            *("--run-dir", str(tmp_path), *args),
        )
        assert said in stderr


def _scripted(tmp_path: Path, cases: str) -> tuple[SwarmRuntime, Path]:
    """A swarm runtime whose docker logs each argv and answers by `cases` (the body of a
    `case "$1 $2"`); the log."""
    calls = tmp_path / "calls"
    fake = tmp_path / "docker"
    script = f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\ncase "$1 $2" in\n{cases}esac\n'
    fake.write_text(script, encoding="utf-8")
    fake.chmod(0o755)
    return SwarmRuntime(tmp_path / "rt", host="unix:///nowhere.sock", binary=str(fake)), calls


# What `create` asks before its services: no such service yet, the image, the daemon's
# security options (user namespaces: the default gid), the egress overlay; a secret's
# value read from stdin.
CREATE_CASES = (
    '  "service inspect") echo "Error: no such service: x" >&2; exit 1;;\n'
    "  \"image inspect\") echo '{}';;\n"
    '  "info --format") echo \'["name=userns"]\';;\n'
    '  "network ls") echo egress0;;\n'
    '  "secret create") cat > /dev/null;;\n'
)


def _keyed_spec(tmp_path: Path, key: str, constraints: tuple[str, ...] = ()) -> SandboxSpec:
    """A sandbox whose platform key goes through a credential proxy."""
    rest, ws = "https://platform.example/api/v1", "wss://platform.example/api/v1/socket"
    return SandboxSpec(
        name="my-agent",
        workspaces=(tmp_path,),
        image="agent:1",
        env={"BAND_REST_URL": rest, "BAND_WS_URL": ws},
        secrets=(
            Secret("BAND_API_KEY", ("platform.example",), key, scopes=band_key_scopes(rest, ws)),
        ),
        limits=Limits(constraints=constraints),
    )


def test_a_task_not_yet_placed_is_live_and_on_no_node(tmp_path: Path) -> None:
    """`docker service ps` prints no node for a task the scheduler has not placed (a full
    cluster, a constraint no node meets yet): the sandbox is still starting, not stopped,
    and runs nowhere yet. (Split on spaces, that row read as node `Pending`, state `2`.)"""
    runtime, _calls = _scripted(
        tmp_path,
        '  "service inspect") echo \'{"bandkit.owner":"run1"}\';;\n'
        "  \"service ps\") printf 'abc123\\t\\tPending 2 seconds ago\\n';;\n",
    )
    assert runtime.status("my-agent") is SandboxStatus.RUNNING
    assert runtime.where("my-agent") == "-"


def test_the_proxy_runs_only_where_its_sandbox_may(tmp_path: Path) -> None:
    """The placement constraints a sandbox is given (a fleet file's `placement`) bind its
    credential proxy too: the key it holds goes only to the nodes the agent may use."""
    runtime, calls = _scripted(
        tmp_path,
        CREATE_CASES + "  \"service ps\") printf 't1\\tnode1\\tRunning 1 second ago\\n';;\n",
    )
    only = ("node.labels.keys==trusted", "node.role==worker")
    runtime.create(_keyed_spec(tmp_path, "k-canary", only))
    assert "k-canary" not in calls.read_text()  # the key went by stdin, never in argv
    creates = [line.split() for line in calls.read_text().splitlines()]
    creates = [argv for argv in creates if argv[:2] == ["service", "create"]]
    assert len(creates) == 2  # the proxy, then the agent
    for argv in creates:
        placed = [argv[i + 1] for i, a in enumerate(argv) if a == "--constraint"]
        assert placed == list(only), argv


def test_a_task_that_cannot_run_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swarm keeps why a task does not run (no node meets its constraints, its image is
    missing) on the task, not in any container's log: a proxy that never starts names it
    in the error, and the report of a sandbox that did not come up (the log tail
    `kit.provision` and `fleet.up` print) ends with its latest tasks, oldest first."""
    from bandkit.kit.commands import log_tail

    monkeypatch.setattr(swarm_runtime, "PROXY_START_S", 0.0)
    unplaced = "no suitable node (scheduling constraints not satisfied on 3 nodes)"
    runtime, _calls = _scripted(
        tmp_path,
        CREATE_CASES + '  "service ps") case "$*" in\n'
        f"    *Error*) printf '\\tPending 1 minute ago\\t\"{unplaced}\"\\n'\n"
        "             printf 'node2\\tRejected 2 minutes ago\\t'\n"
        "             printf '\"No such image: a:1\\033[2J\"\\n';;\n"
        "    *) printf 't1\\t\\tPending 1 minute ago\\n';;\n"
        "  esac;;\n",
    )
    with pytest.raises(SandboxError, match=r"did not start within 0s \(node2 Rejected") as err:
        runtime.create(_keyed_spec(tmp_path, "k-1"))
    assert f"no node Pending 1 minute ago: {unplaced}); see" in str(err.value)
    latest = [
        "node2 Rejected 2 minutes ago: No such image: a:1\\x1b[2J",  # escaped, not sent
        f"no node Pending 1 minute ago: {unplaced}",
    ]
    assert runtime.scheduler_report("my-agent") == latest
    assert runtime.logs("my-agent").startup == ""  # a log only grows: the tasks are not in it
    tail = log_tail(runtime, "my-agent", ["k-1"]).splitlines()
    assert tail[-3:] == ["--- swarm tasks (latest last)", *latest]
