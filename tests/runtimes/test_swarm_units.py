"""The swarm runtime's parts that need no cluster: its credential proxy as a zipapp, the
refusal to run without a swarm, and the labelled removal of only what is ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bandkit.runtimes.base import SandboxError, SandboxSpec
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.select import get_runtime
from bandkit.runtimes.swarm import objects, proxyapp
from tests.support.wait import wait_for


def test_the_proxy_zipapp_is_reproducible_and_runs_on_its_own(tmp_path: Path) -> None:
    """Isolated (`-I`: no site-packages, no user site, no PYTHONPATH), so it runs only if
    everything keyproxy imports is inside; it serves its route and answers a request
    without the token with 403 before it opens an upstream connection."""
    data = proxyapp.build()
    assert data == proxyapp.build()
    assert proxyapp.config_name(data) == proxyapp.config_name(proxyapp.build())
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


def test_without_a_swarm_it_says_how_to_get_one(tmp_path: Path) -> None:
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
