"""kill -9 of the process creating a sandbox, mid-create, then teardown from the manifest:
no sandbox, secret, rule or process is left (local and simulated sbx)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from bandkit import processes
from bandkit.manifest import Manifest, teardown
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.sbx import SbxRuntime
from bandkit.runtimes.select import removers
from tests.fakes.simharness import simulator
from tests.runtimes.helpers import INSECURE, echo_workspace, make_kit, scratch_dir

# Creates a sandbox and SIGKILLs itself right after the runtime started the agent, before
# create() returns (the manifest holds the entries; nothing after them ran).
DRIVER = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    from bandkit.manifest import Manifest
    from bandkit.runtimes import hostbox
    from bandkit.runtimes.base import SandboxSpec, Secret
    from bandkit.runtimes.local import LocalRuntime
    from bandkit.runtimes.sbx import SbxCli, SbxRuntime
    a = json.loads(sys.argv[1])
    if a["kind"] == "local":
        original = hostbox.start
        def start(*args, **kwargs):
            original(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        hostbox.start = start
    else:
        original = SbxCli.run
        def run(self, args, **kwargs):
            result = original(self, args, **kwargs)
            if args[0] == "create":
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        SbxCli.run = run
    with Manifest.open(Path(a["manifest"])) as m:
        rt = LocalRuntime(Path(a["run_dir"]), manifest=m) if a["kind"] == "local" \\
            else SbxRuntime(manifest=m)
        rt.create(SandboxSpec(a["name"], (Path(a["ws"]),), kit=a["kit"], env=a["env"],
                              secrets=(Secret("BAND_API_KEY", ("127.0.0.1",), "k"),),
                              egress=("127.0.0.1:9",)))
    """
)


@pytest.mark.parametrize("kind", ["local", "sbx"])
def test_kill_9_mid_create_then_teardown(
    kind: str, agent_sdk: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = scratch_dir("rt-crash-")
    try:
        with simulator("0.35.0") as sim:
            sim("policy", "init", "balanced", check=True)
            for key, value in sim.env.items():
                monkeypatch.setenv(key, value)
            ws = echo_workspace(
                scratch, agent_id="a1", rest_url="http://127.0.0.1:9", ws_url="ws://127.0.0.1:9"
            )
            args = {
                "kind": kind,
                "manifest": str(scratch / "m.json"),
                "run_dir": str(scratch / "run"),
                "name": "crashbox",
                "ws": str(ws),
                "kit": str(make_kit(scratch)),
                "env": INSECURE,
            }
            result = subprocess.run(
                [sys.executable, "-c", DRIVER, json.dumps(args)],
                env=dict(os.environ),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
            rt = LocalRuntime(scratch / "run") if kind == "local" else SbxRuntime()
            assert "crashbox" in rt.list()
            assert _tags(), "the agent should have outlived its creator"
            with Manifest.open(scratch / "m.json") as m:
                rt = (
                    LocalRuntime(scratch / "run", manifest=m)
                    if kind == "local"
                    else SbxRuntime(manifest=m)
                )
                report = teardown(m, removers([rt]))
            assert report.clean, report.lines()
            assert rt.list() == []
            assert not rt.has_secret("crashbox", "127.0.0.1")
            assert _tags() == []
            assert not (scratch / "m.json").exists()
            if kind == "sbx":
                assert json.loads(sim("policy", "ls", "--json").stdout)["rules"] == []
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _tags() -> list[int]:
    def crash_tagged(p: processes.Proc) -> bool:
        environ = b"\0".join(p.environ)
        return b"rt-crash-" in environ and processes.TAG_ENV.encode() in environ

    return processes.scan(crash_tagged)
